// A real Slurm on the emulated cluster, as root (ctest label `cluster`):
// Debian's munged, slurmctld and slurmd brought up by `cluster up --slurm`,
// srun training across the hosts, a task killed mid-run, and sweeps whose
// runs are batch jobs. Without root, network namespaces or Slurm's packages
// every test is reported skipped, with the reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "cluster/drill_util.h"
#include "core/error.h"
#include "core/files.h"
#include "core/job_env.h"
#include "slurm/slurm_cluster.h"
#include "sweep/results_store.h"

namespace dlscale {
namespace {

using testing::Job;
using testing::pids_in;
using testing::run_dlscale;
using testing::temp_path;

/// Why Slurm cannot run here, or "".
std::string why_no_slurm() {
  if (const std::string why = testing::why_no_clusters(); !why.empty()) return why;
  try {
    slurm::check_slurm_installed();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

/// The processes of host `host` whose environment holds `var`.
std::vector<pid_t> with_env(const std::string& name, int host, const std::string& var) {
  std::vector<pid_t> out;
  for (pid_t p : pids_in(cluster::host_namespace(name, host))) {
    if (testing::has_env(p, var)) out.push_back(p);
  }
  return out;
}

/// The Slurm and munge daemons running in host `host`, by name.
std::vector<std::pair<pid_t, std::string>> daemons_on(const std::string& name, int host) {
  std::vector<std::pair<pid_t, std::string>> out;
  for (pid_t p : pids_in(cluster::host_namespace(name, host))) {
    std::ifstream in("/proc/" + std::to_string(p) + "/comm");
    std::string comm;
    std::getline(in, comm);
    if (comm == "munged" || comm == "slurmctld" || comm == "slurmd") out.emplace_back(p, comm);
  }
  return out;
}

/// The daemons of every host.
std::vector<pid_t> daemons(const std::string& name, int hosts) {
  std::vector<pid_t> out;
  for (int h = 0; h < hosts; ++h) {
    for (const auto& [pid, comm] : daemons_on(name, h)) out.push_back(pid);
  }
  return out;
}

/// Whether `pid` still runs (a zombie no longer does).
bool alive(pid_t pid) {
  const std::optional<ProcState> st = proc_state(pid);
  return st.has_value() && st->state != 'Z';
}

/// Waits until rank 0 of an srun job has met its peers (its log line), then
/// a second more: the job is training. False after 60 s.
bool wait_for_training(const Job& job) {
  for (int i = 0; i < 3000; ++i) {
    if (job.err().find("workers connected via") != std::string::npos) {
      std::this_thread::sleep_for(std::chrono::seconds(1));
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

class SlurmDrill : public ::testing::Test {
 protected:
  void SetUp() override {
    static const std::string why = why_no_slurm();
    DLSCALE_SKIP_UNLESS_ABLE(why.empty() ? why : "Slurm drills: " + why);
    static int counter = 0;
    name_ = fmt::format("u{}x{}", ::getpid() % 100000, counter++);
    ::setenv(kEnvJobSecret, "slurm-drill-secret", 1);
  }
  void TearDown() override {
    if (!name_.empty()) cluster::cluster_down(name_);
  }
  void up(int hosts, const std::string& flags = "") {
    const auto o =
        run_dlscale(fmt::format("cluster up --name {} --hosts {} --slurm {}", name_, hosts, flags));
    ASSERT_EQ(o.code, 0) << o.out << o.err;
  }
  /// `dlscale cluster exec` on host 0 of this cluster.
  std::string on_host0(const std::string& command) const {
    return fmt::format("cluster exec --name {} 0 -- {}", name_, command);
  }
  std::string name_;
};

TEST_F(SlurmDrill, UpShowsIdleNodesInEveryHostAndDownLeavesNothing) {
  up(3);
  auto o = run_dlscale(fmt::format("cluster list"));
  // This cluster's row: name, hosts, link, tcp, state, slurm, by words
  // (other tests' clusters, listed too, may widen the columns).
  std::istringstream row(o.out.substr(o.out.find("\n" + name_ + " ") + 1));
  std::string name, hosts, link, tcp, state, slurm_state;
  row >> name >> hosts >> link >> tcp >> state >> slurm_state;
  EXPECT_EQ(name + " " + hosts + " " + tcp + " " + state + " " + slurm_state,
            name_ + " 3 cubic up running")
      << o.out;
  for (int h = 0; h < 3; ++h) {
    o = run_dlscale(fmt::format("cluster exec --name {} {} -- sinfo -h -N -o '%N %t'", name_, h));
    EXPECT_EQ(o.out, fmt::format("{0}-h0 idle\n{0}-h1 idle\n{0}-h2 idle\n", name_)) << o.err;
  }
  // Each host resolves every host's name (Slurm's node lists, Gloo).
  o = run_dlscale(fmt::format("cluster exec --name {} 2 -- getent hosts {}-h1", name_, name_));
  EXPECT_EQ(o.out.rfind("10.77.0.2", 0), 0u) << o.out;
  o = run_dlscale(fmt::format("cluster up --name {} --hosts 3 --slurm", name_));
  EXPECT_NE(o.out.find("was already up"), std::string::npos) << o.out;
  const std::string dir = slurm::slurm_dir(name_);
  const std::vector<pid_t> running = daemons(name_, 3);
  EXPECT_EQ(running.size(), 5u);  // munged, slurmctld, a slurmd per host
  o = run_dlscale(fmt::format("cluster down --name {}", name_));
  EXPECT_EQ(o.code, 0) << o.err;
  for (pid_t p : running) EXPECT_FALSE(alive(p)) << "Slurm daemon " << p << " outlived cluster down";
  EXPECT_FALSE(std::filesystem::exists(dir));
  EXPECT_FALSE(std::filesystem::exists(cluster::cluster_state_dir() + "/" + name_ + ".hosts"));
  EXPECT_FALSE(cluster::find_cluster(name_).has_value());
}

TEST_F(SlurmDrill, MissingPackagesAreOneLine) {
  // A PATH with iproute2 but none of Slurm's programs.
  const std::string bin = temp_path("bin");
  std::filesystem::create_directories(bin);
  for (const char* tool : {"ip", "tc"}) {
    std::string where;
    ASSERT_EQ(run_captured({"sh", "-c", std::string("command -v ") + tool}, &where), 0);
    std::filesystem::create_symlink(where.substr(0, where.find('\n')), bin + "/" + tool);
  }
  const auto o = testing::run_shell(fmt::format("PATH={} {} cluster up --name {} --hosts 2 --slurm", bin,
                                                DLSCALE_BINARY, name_));
  EXPECT_EQ(o.code, 2);
  EXPECT_EQ(o.err, "dlscale: error: Slurm needs 'munged' (Debian package munge; scripts/setup.sh installs it)\n");
  EXPECT_FALSE(cluster::find_cluster(name_).has_value()) << "a failed up left the cluster behind";
  dlscale::remove_tree(bin);
}

TEST_F(SlurmDrill, ADaemonThatFailsToStartIsNamedWithItsLastLogLine) {
  // Slurm's real programs, but a slurmctld that dies at start.
  const std::string bin = temp_path("bin");
  std::filesystem::create_directories(bin);
  write_file_atomic(bin + "/slurmctld",
                    "#!/bin/sh\n[ \"$1\" = -V ] && { echo 'slurm 22.05.8'; exit 0; }\n"
                    "echo 'slurmctld: fatal: Unable to bind listen port (6817): Address already in use' >&2\nexit 1\n");
  std::filesystem::permissions(bin + "/slurmctld", std::filesystem::perms(0755));
  const auto o = testing::run_shell(fmt::format("PATH={}:$PATH {} cluster up --name {} --hosts 2 --slurm", bin,
                                                DLSCALE_BINARY, name_));
  EXPECT_EQ(o.code, 2);
  EXPECT_EQ(o.err,
            "dlscale: error: Slurm: slurmctld on host 0 exited with code 1 at start: slurmctld: fatal: Unable to "
            "bind listen port (6817): Address already in use\n");
  EXPECT_FALSE(cluster::find_cluster(name_).has_value()) << "a failed up left the cluster behind";
  EXPECT_FALSE(std::filesystem::exists(slurm::slurm_dir(name_)));
  dlscale::remove_tree(bin);
}

TEST_F(SlurmDrill, SrunAcrossHostsEqualsLocalWorkersAndGroupsByNode) {
  up(2);
  const std::string train = "train --model lenet --batch 16 --steps 6 --warmup 1 --display-every 0 --threads 1 --seed 7";
  const std::string record = temp_path("srun.json");
  auto o = run_dlscale(on_host0(fmt::format("srun -N 2 --ntasks-per-node 1 {} {} --json {}", DLSCALE_BINARY,
                                            train, record)));
  ASSERT_EQ(o.code, 0) << o.out << o.err;
  const nlohmann::json r = nlohmann::json::parse(read_file(record));
  EXPECT_EQ(r["inputs"]["world_size"], 2);
  EXPECT_EQ(r["inputs"]["slurm"]["nodes"], nlohmann::json::array({name_ + "-h0", name_ + "-h1"}));
  EXPECT_EQ(r["inputs"]["slurm"]["step_id"], "0");
  EXPECT_FALSE(r["inputs"]["slurm"]["job_id"].get<std::string>().empty());
  const std::string local = temp_path("local.json");
  o = run_dlscale(fmt::format("{} --workers 2 --json {}", train, local));
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(r["results"]["loss_last"], nlohmann::json::parse(read_file(local))["results"]["loss_last"]);
  // 2 nodes x 2 tasks, hierarchical: the groups are Slurm's nodes.
  o = run_dlscale(on_host0(fmt::format("srun -N 2 --ntasks-per-node 2 {} {} --strategy hierarchical --json {}",
                                       DLSCALE_BINARY, train, record)));
  ASSERT_EQ(o.code, 0) << o.out << o.err;
  const nlohmann::json h = nlohmann::json::parse(read_file(record));
  EXPECT_EQ(h["inputs"]["world_size"], 4);
  EXPECT_EQ(h["results"]["comm"]["nodes"], 2);
  EXPECT_EQ(h["results"]["comm"]["replicas_identical"], true);
  // Open MPI under srun: through PMIx, else one line saying so.
  o = run_dlscale(on_host0(fmt::format("srun --mpi=pmix -N 2 --ntasks-per-node 1 {} {} --backend mpi --json {}",
                                       DLSCALE_BINARY, train, record)));
  ASSERT_EQ(o.code, 0) << o.out << o.err;
  const nlohmann::json m = nlohmann::json::parse(read_file(record));
  EXPECT_EQ(m["results"]["comm"]["backend"], "mpi");
  EXPECT_EQ(m["results"]["loss_last"], r["results"]["loss_last"]);
  o = run_dlscale(on_host0(fmt::format("srun -N 2 --ntasks-per-node 1 {} {} --backend mpi", DLSCALE_BINARY, train)));
  EXPECT_NE(o.code, 0);
  EXPECT_NE(o.err.find("dlscale: error: --backend mpi under srun needs 'srun --mpi=pmix'"), std::string::npos) << o.err;
  std::filesystem::remove(record);
  std::filesystem::remove(local);
}

TEST_F(SlurmDrill, TaskKilledMidRunFailsTheStepNamingRankAndNode) {
  up(2);
  Job job(on_host0(fmt::format("srun -N 2 --ntasks-per-node 1 {} train --model lenet --batch 16 --steps 100000 "
                               "--display-every 0 --threads 1 --timeout 4",
                               DLSCALE_BINARY)));
  ASSERT_TRUE(wait_for_training(job)) << job.err();
  const std::vector<pid_t> tasks = with_env(name_, 1, "SLURM_PROCID");
  ASSERT_FALSE(tasks.empty()) << job.err();
  for (pid_t p : tasks) ::kill(p, SIGKILL);
  double took = 0;
  const int code = job.wait(60, &took);
  EXPECT_NE(code, 0) << job.err();
  EXPECT_NE(code, -1) << "the step did not end: " << job.err();
  const std::string err = job.err();
  EXPECT_NE(err.find(fmt::format("{}-h1: task 1: Killed", name_)), std::string::npos) << err;
  EXPECT_NE(err.find(fmt::format("dlscale: error: rank 0"), 0), std::string::npos) << err;
  EXPECT_NE(err.find(fmt::format("(Slurm node {}-h0, step", name_)), std::string::npos) << err;
  for (int i = 0; i < 500 && !(with_env(name_, 0, "SLURM_PROCID").empty() && with_env(name_, 1, "SLURM_PROCID").empty());
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(with_env(name_, 0, "SLURM_PROCID").empty() && with_env(name_, 1, "SLURM_PROCID").empty())
      << "a task outlived its step";
}

TEST_F(SlurmDrill, SlurmdKilledMidRunFailsTheStepAsANodeFailure) {
  // Links of 100 Mbit/s: lenet's step then waits about a second on its
  // exchange, so that the two ranks do not keep both cores busy for the
  // ~20 s that Slurm takes to declare the node dead (50 s of CPU on
  // unshaped links); the step stays well within --timeout.
  up(2, "--link-mbit 100");
  Job job(on_host0(fmt::format("srun -N 2 --ntasks-per-node 1 {} train --model lenet --batch 16 --steps 100000 "
                               "--display-every 0 --threads 1 --timeout 4",
                               DLSCALE_BINARY)));
  ASSERT_TRUE(wait_for_training(job)) << job.err();
  int killed = 0;
  for (const auto& [pid, comm] : daemons_on(name_, 1)) {
    if (comm == "slurmd" && ::kill(pid, SIGKILL) == 0) ++killed;
  }
  ASSERT_EQ(killed, 1);
  // slurmctld declares the node dead after SlurmdTimeout (10 s) and a ping.
  const int code = job.wait(90);
  EXPECT_NE(code, -1) << "the step outlived its node's slurmd: " << job.err();
  EXPECT_NE(code, 0);
  EXPECT_NE(job.err().find(fmt::format("Node failure on {}-h1", name_)), std::string::npos) << job.err();
}

/// A sweep of 4 runs as batch jobs, 2 at a time, run in host 0.
struct SlurmSweep {
  std::string dir = temp_path("slurmsweep");
  std::string flags;
  explicit SlurmSweep(const std::string& cluster) {
    std::filesystem::create_directories(dir);
    flags = fmt::format("cluster exec --name {} 0 -- {} sweep {}/s.yaml --db {}/r.db --output-dir {}/runs "
                        "--progress plain",
                        cluster, DLSCALE_BINARY, dir, dir, dir);
  }
  void write(long long steps) const {
    write_file_atomic(dir + "/s.yaml", fmt::format(R"Y(name: slurmdrill
parameters: {{launcher: slurm, hosts: 2, workers-per-host: 1, model: lenet, batch: 16, steps: {}, warmup: 1,
             display-every: 0, threads: 1, max-jobs: 2}}
variables:
  seed: [1, 2, 3, 4]
)Y",
                                                   steps));
  }
  ~SlurmSweep() { dlscale::remove_tree(dir); }
};

/// The jobs Slurm shows, one ID per line.
std::string queue(const std::string& cluster) {
  return run_dlscale(fmt::format("cluster exec --name {} 0 -- squeue -h -o %i", cluster)).out;
}

/// The last `lines` lines of `text`.
std::string last_lines(const std::string& text, int lines) {
  std::size_t at = text.size();
  for (int n = 0; n <= lines && at != std::string::npos && at > 0; ++n)
    at = text.rfind('\n', at - 1);
  return at == std::string::npos ? text : text.substr(at + 1);
}

/// What Slurm says of the cluster's jobs, and its daemons' last log lines:
/// printed when a drill finds a job where none should be.
std::string slurm_diagnosis(const std::string& cluster) {
  std::string out =
      run_dlscale(fmt::format("cluster exec --name {} 0 -- scontrol show job -o", cluster)).out;
  const std::string logs = slurm::slurm_dir(cluster) + "/log";
  std::error_code ec;  // no logs: what scontrol said is all there is
  for (const auto& e : std::filesystem::directory_iterator(logs, ec)) {
    out += fmt::format("--- {} (end)\n{}", e.path().string(),
                       last_lines(read_file(e.path().string()), 25));
  }
  return out;
}

struct KilledSweep {
  int code = 0;     ///< the sweep's exit code (128 + SIGKILL)
  std::string out;  ///< what it printed
};

/// Starts the sweep and kills it outright (SIGKILL) once the second of its
/// 4 runs is submitted: its jobs go on in Slurm, its store says running.
KilledSweep kill_after_two_submitted(const SlurmSweep& s) {
  Job sweep(s.flags);
  for (int i = 0; i < 1500 && sweep.out().find("[2/4] lenet weak w2 b16 repeat 1/1: submitted") == std::string::npos;
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(-sweep.pid, SIGKILL);
  KilledSweep k;
  k.code = sweep.wait_within(5);
  k.out = sweep.out();
  return k;
}

TEST_F(SlurmDrill, SweepRunsAsBatchJobsAndASecondInvocationSkipsThem) {
  up(2);
  SlurmSweep s(name_);
  s.write(4);
  auto o = run_dlscale(s.flags);
  ASSERT_EQ(o.code, 0) << o.out << o.err;
  EXPECT_NE(o.out.find("4 completed, 0 failed, 0 skipped, 0 already done of 4 planned"), std::string::npos) << o.out;
  // max-jobs 2: never a third submitted before one of the first two ended.
  const std::size_t third = o.out.find("[3/4] lenet weak w2 b16 repeat 1/1: submitted as Slurm job");
  const std::size_t first_done = std::min(o.out.find("[1/4] lenet weak w2 b16: completed"),
                                          o.out.find("[2/4] lenet weak w2 b16: completed"));
  ASSERT_NE(third, std::string::npos) << o.out;
  EXPECT_LT(first_done, third) << o.out;
  sweep::ResultsStore store(s.dir + "/r.db");
  std::set<std::string> jobs;
  for (const sweep::RunRecord& r : store.runs("slurmdrill")) {
    EXPECT_EQ(r.status, "completed");
    jobs.insert(r.slurm_job);
    ASSERT_EQ(r.repeats.size(), 1u);
    const nlohmann::json rec = nlohmann::json::parse(r.repeats[0].record);
    EXPECT_EQ(rec["inputs"]["slurm"]["job_id"], r.slurm_job);
    EXPECT_EQ(rec["inputs"]["slurm"]["nodes"].size(), 2u);
  }
  EXPECT_EQ(jobs.size(), 4u);
  o = run_dlscale(s.flags);
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("0 completed, 0 failed, 0 skipped, 4 already done of 4 planned"), std::string::npos) << o.out;
  EXPECT_EQ(o.out.find("submitted"), std::string::npos) << o.out;
}

TEST_F(SlurmDrill, SweepInterruptedCancelsItsJobsAndKilledOneIsFollowedOnResume) {
  up(2);
  SlurmSweep s(name_);
  s.write(100000);
  {
    Job sweep(s.flags);
    for (int i = 0; i < 1500 && sweep.out().find("Slurm job") == std::string::npos; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    ::kill(-sweep.pid, SIGTERM);  // the sweep (cluster exec became it)
    EXPECT_EQ(sweep.wait_within(45), 128 + SIGTERM) << sweep.out() << sweep.err();
    EXPECT_NE(sweep.out().find("cancelled"), std::string::npos) << sweep.out();
    EXPECT_EQ(queue(name_), "") << "the interrupted sweep left jobs in Slurm:\n"
                                << sweep.out() << sweep.err() << slurm_diagnosis(name_);
  }
  // Killed outright instead: its jobs go on, and the next invocation follows
  // them rather than submitting them again.
  s.write(30);
  const KilledSweep killed = kill_after_two_submitted(s);
  EXPECT_EQ(killed.code, 128 + SIGKILL);
  const std::string& submitted = killed.out;
  const auto o = run_dlscale(s.flags);
  ASSERT_EQ(o.code, 0) << o.out << o.err;
  EXPECT_NE(o.out.find("submitted by an earlier sweep"), std::string::npos) << submitted << o.out;
  EXPECT_NE(o.out.find("4 completed, 0 failed"), std::string::npos) << o.out;
  EXPECT_EQ(queue(name_), "") << slurm_diagnosis(name_);
}

/// Every run of the drill's sweep as "status job", and every file of its
/// output directory with its contents.
std::string sweep_snapshot(const SlurmSweep& s) {
  std::string out;
  sweep::ResultsStore store(s.dir + "/r.db");
  for (const sweep::RunRecord& r : store.runs("slurmdrill", false)) out += r.status + " " + r.slurm_job + "\n";
  for (const auto& e : std::filesystem::recursive_directory_iterator(s.dir + "/runs")) {
    if (e.is_regular_file()) out += e.path().string() + ":" + read_file(e.path().string()) + "\n";
  }
  return out;
}

// A sweep resumed while slurmctld does not answer (stopped here, so that
// Slurm keeps its jobs) stops in one line, exit 5, and changes nothing: it
// once stored the runs in flight as failed and wrote over their jobs' logs
// (issue 42). Once slurmctld answers, a resume follows the jobs.
TEST_F(SlurmDrill, SweepResumedWhileSlurmctldIsDownChangesNothingAndALaterOneFollowsItsJobs) {
  up(2);
  SlurmSweep s(name_);
  s.write(30);
  ASSERT_EQ(kill_after_two_submitted(s).code, 128 + SIGKILL);
  pid_t ctld = 0;
  for (const auto& [pid, comm] : daemons_on(name_, 0)) {
    if (comm == "slurmctld") ctld = pid;
  }
  ASSERT_GT(ctld, 0);
  const std::string before = sweep_snapshot(s);
  ASSERT_EQ(::kill(ctld, SIGSTOP), 0);
  const auto refused = run_dlscale(s.flags);
  ::kill(ctld, SIGCONT);
  EXPECT_EQ(refused.code, 5) << refused.out << refused.err;
  EXPECT_EQ(refused.err.rfind("dlscale: error: cannot reach slurmctld (scontrol ping: ", 0), 0u) << refused.err;
  EXPECT_EQ(std::count(refused.err.begin(), refused.err.end(), '\n'), 1) << refused.err;
  EXPECT_EQ(refused.out.find("submitted"), std::string::npos) << refused.out;
  EXPECT_EQ(sweep_snapshot(s), before);
  const auto o = run_dlscale(s.flags);
  ASSERT_EQ(o.code, 0) << o.out << o.err;
  EXPECT_NE(o.out.find("[1/4] lenet weak w2 b16 repeat 1/1: following Slurm job"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("[2/4] lenet weak w2 b16 repeat 1/1: following Slurm job"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("4 completed, 0 failed"), std::string::npos) << o.out;
  EXPECT_EQ(queue(name_), "") << slurm_diagnosis(name_);
}

}  // namespace
}  // namespace dlscale
