#include "slurm/batch.h"

#include <sys/stat.h>

#include <cmath>
#include <cstdlib>
#include <sstream>

#include "core/error.h"
#include "core/files.h"
#include "core/subprocess.h"
#include "core/text.h"

namespace dlscale::slurm {
namespace {

/// 'word' with every ' closed, escaped and reopened.
std::string shell_quote(const std::string& word) {
  std::string q = "'";
  for (const char c : word) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

/// Slurm's "ExitCode=rc:signal".
void parse_exit(const std::string& text, JobState& s) {
  const std::size_t colon = text.find(':');
  s.exit_code = std::atoi(text.substr(0, colon).c_str());
  s.signal = colon == std::string::npos ? 0 : std::atoi(text.substr(colon + 1).c_str());
}

/// A Slurm client command, run in its own process group: a Ctrl-C, or a
/// signal sent to the sweep's group, does not end it mid-request (an sbatch
/// ended there may have submitted a job whose ID nobody reads, an scontrol
/// answers nothing). As run_captured.
int run_client(SpawnOptions spawn, std::string* out, int* signal = nullptr) {
  spawn.own_group = true;
  spawn.die_with_parent = false;
  return run_captured(std::move(spawn), out, signal);
}

int run_client(const std::vector<std::string>& argv, std::string* out, int* signal = nullptr) {
  SpawnOptions spawn;
  spawn.argv = argv;
  return run_client(std::move(spawn), out, signal);
}

/// A query ended by a signal said nothing of the job: not "unknown" (a job
/// read so was once left running when a sweep was interrupted).
void refuse_signalled(const std::string& command, const std::string& id, int signal) {
  if (signal == 0) return;
  throw PeerFailure(
      fmt::format("{} for Slurm job {} was ended by signal {}: nothing is known of the job",
                  command, id, signal));
}

/// `sacct -n -X -P -o State,ExitCode,Elapsed` for jobs scontrol has forgotten.
JobState query_accounting(const std::string& id) {
  JobState s;
  std::string out;
  int signal = 0;
  const int rc = run_client({"sacct", "-n", "-X", "-P", "-j", id, "-o", "State,ExitCode,Elapsed"},
                            &out, &signal);
  refuse_signalled("sacct", id, signal);
  if (rc != 0) return s;
  std::istringstream in(out);
  std::string line;
  if (!std::getline(in, line) || line.empty()) return s;
  std::vector<std::string> f;
  std::istringstream fields(line);
  for (std::string part; std::getline(fields, part, '|');) f.push_back(part);
  if (f.size() < 3) return s;
  s.known = true;
  s.state = f[0].substr(0, f[0].find(' '));  // "CANCELLED by 0"
  parse_exit(f[1], s);
  s.run_time_s = parse_slurm_duration(f[2]);
  return s;
}

/// The last non-empty line of a command's output.
std::string last_line(const std::string& out) {
  const std::string t = trim(out);
  const std::size_t nl = t.rfind('\n');
  return nl == std::string::npos ? t : t.substr(nl + 1);
}

}  // namespace

bool says_controller_unreachable(const std::string& output) {
  for (const char* what : {"Unable to contact slurm controller", "Socket timed out on send/recv",
                           "Zero Bytes were transmitted or received"}) {
    if (output.find(what) != std::string::npos) return true;
  }
  return false;
}

void throw_controller_unreachable(const std::string& command, const std::string& output) {
  // The line that says so ("... is DOWN", "Unable to contact ..."), not a banner after it.
  std::string why = last_line(output);
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);) {
    if (says_controller_unreachable(line) || line.find(" is DOWN") != std::string::npos) {
      why = trim(line);
      break;
    }
  }
  throw PeerFailure(fmt::format("cannot reach slurmctld ({}: {}); nothing was submitted or stored, and the jobs "
                                "already submitted go on: run the sweep again once Slurm answers",
                                command, printable(why)));
}

void check_controller() {
  std::string out;
  const int rc = run_client({"scontrol", "ping"}, &out);
  if (rc == kExitExecFailed) return;  // no Slurm client: sbatch's own check names it
  if (rc != 0 || out.find("DOWN") != std::string::npos || says_controller_unreachable(out)) {
    throw_controller_unreachable("scontrol ping", out);
  }
}

void write_batch_script(const std::string& path, const std::vector<std::string>& argv,
                        const std::string& comment) {
  DLSCALE_CHECK(!argv.empty(), "a batch script needs a command");
  // printable(): no byte of a sweep's name or parameters can end the comment.
  std::string text = "#!/bin/sh\n# " + printable(comment) + "\nexec";
  for (const std::string& word : argv) text += " " + shell_quote(word);
  write_file_atomic(path, text + "\n");
  DLSCALE_CHECK(::chmod(path.c_str(), 0755) == 0, "cannot make '{}' executable", path);
}

std::vector<std::string> sbatch_command(const BatchJob& j) {
  std::vector<std::string> argv = {"sbatch", "--parsable", "--job-name", j.name, "--output", j.log_path,
                                   "--ntasks", std::to_string(j.tasks)};
  if (j.nodes > 0) argv.insert(argv.end(), {"--nodes", std::to_string(j.nodes)});
  if (j.tasks_per_node > 0) argv.insert(argv.end(), {"--ntasks-per-node", std::to_string(j.tasks_per_node)});
  if (j.time_limit_s > 0) {
    const long long minutes = std::max(1LL, static_cast<long long>(std::ceil(j.time_limit_s / 60)));
    argv.insert(argv.end(), {"--time", std::to_string(minutes)});
  }
  argv.insert(argv.end(), j.extra.begin(), j.extra.end());
  argv.push_back(j.script_path);
  return argv;
}

std::string submit_job(const BatchJob& job) {
  SpawnOptions spawn;
  spawn.argv = sbatch_command(job);
  spawn.set_env = job.env;
  std::string out;
  const int rc = run_client(spawn, &out);
  out = trim(out);
  if (rc == kExitExecFailed) throw Error("launcher slurm needs 'sbatch' (Debian package slurm-client) on PATH");
  if (says_controller_unreachable(out)) throw_controller_unreachable("sbatch", out);
  const std::string last = last_line(out);
  // --parsable prints "ID" or "ID;cluster".
  const std::string id = last.substr(0, last.find(';'));
  const bool numeric = !id.empty() && id.find_first_not_of("0123456789_") == std::string::npos;
  // No slurm.conf, or no controller to reach: Slurm is not usable from here.
  const bool no_slurm = out.find("configuration source") != std::string::npos;
  DLSCALE_CHECK(rc == 0 && numeric, "sbatch refused the job: {}{}", out.empty() ? "(no output)" : last,
                no_slurm ? " (run the sweep where Slurm's commands work: a login node, or a host of the emulated "
                           "cluster with 'dlscale cluster exec --name N 0 -- dlscale sweep ...'; docs/slurm.md)"
                         : "");
  return id;
}

bool JobState::active() const {
  return known && (state == "PENDING" || state == "RUNNING" || state == "CONFIGURING" || state == "COMPLETING" ||
                   state == "SUSPENDED" || state == "REQUEUED" || state == "RESIZING" || state == "STAGE_OUT" ||
                   state == "SIGNALING");
}

double parse_slurm_duration(const std::string& text) {
  long days = 0;
  std::string rest = text;
  if (const std::size_t dash = rest.find('-'); dash != std::string::npos) {
    days = std::atol(rest.substr(0, dash).c_str());
    rest = rest.substr(dash + 1);
  }
  std::vector<long> parts;
  std::istringstream in(rest);
  for (std::string p; std::getline(in, p, ':');) {
    if (p.empty() || p.find_first_not_of("0123456789") != std::string::npos) return 0;
    parts.push_back(std::atol(p.c_str()));
  }
  if (parts.empty() || parts.size() > 3) return 0;
  // After "D-", two fields are HH:MM; alone they are MM:SS.
  if (parts.size() == 2 && rest.size() != text.size()) parts.push_back(0);
  double s = 0;
  for (const long p : parts) s = s * 60 + static_cast<double>(p);
  return s + days * 86400.0;
}

JobState parse_scontrol_job(const std::string& line) {
  JobState s;
  std::istringstream in(line);
  for (std::string word; in >> word;) {
    const std::size_t eq = word.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = word.substr(0, eq);
    const std::string value = word.substr(eq + 1);
    if (key == "JobState") s.state = value;
    if (key == "Reason") s.reason = value;
    if (key == "ExitCode") parse_exit(value, s);
    if (key == "RunTime") s.run_time_s = parse_slurm_duration(value);
  }
  s.known = !s.state.empty();
  return s;
}

JobState query_job(const std::string& id) {
  std::string out;
  int signal = 0;
  const int rc = run_client({"scontrol", "show", "job", "-o", id}, &out, &signal);
  if (rc == 0) {
    JobState s = parse_scontrol_job(out);
    if (s.known) return s;
  } else if (says_controller_unreachable(out)) {
    // Not "unknown": the job may be running. Nothing may be decided on it.
    throw_controller_unreachable("scontrol", out);
  }
  refuse_signalled("scontrol show job", id, signal);
  return query_accounting(id);
}

bool cancel_job(const std::string& id) {
  std::string out;
  return run_client({"scancel", id}, &out) == 0;
}

}  // namespace dlscale::slurm
