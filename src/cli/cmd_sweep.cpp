// dlscale sweep: plan a study from a YAML file and run it into the results store.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <iostream>
#include <memory>
#include <set>

#include "cli/commands.h"
#include "cli/numbers.h"
#include "cli/torch_commands.h"
#include "core/build_info.h"
#include "core/child_process.h"
#include "core/error.h"
#include "core/files.h"
#include "launch/train_job_options.h"
#include "report/html.h"
#include "sweep/command.h"
#include "sweep/runner.h"

namespace dlscale::cli {
namespace {

struct SweepFlags {
  std::string file;
  std::string db = "dlscale-results.db";
  std::string output_dir = "dlscale-runs";
  std::string rerun = "none";
  std::string progress = "auto";
  std::string html;
  std::string launcher;  ///< "" = the file's
  long long max_jobs = 0;  ///< 0 = the file's
  bool dry_run = false;
  bool interleave = false;
};

/// --launcher and --max-jobs: the same value for every run of the file.
void override_parameter(sweep::SweepSpec& spec, const std::string& name, const sweep::Value& value) {
  for (const auto& [varied, values] : spec.variables) {
    DLSCALE_CHECK(varied != name, "--{} cannot override '{}', which {} varies under 'variables'", name, name, spec.path);
  }
  auto& params = spec.parameters;
  params.erase(std::remove_if(params.begin(), params.end(), [&](const auto& p) { return p.first == name; }),
               params.end());
  sweep::RawValue raw;
  raw.literal = value;
  params.emplace_back(name, raw);
}

std::atomic<int> g_sweep_signal{0};  // set by SIGINT/SIGTERM: finish the current run's bookkeeping and stop

void on_signal(int sig) { g_sweep_signal = sig; }

std::set<std::string> option_names(CLI::App& app, const char* command) {
  std::set<std::string> names;
  for (const CLI::Option* opt : app.get_subcommand(command)->get_options()) {
    for (const std::string& n : opt->get_lnames()) names.insert(n);
  }
  names.erase("help");
  return names;
}

/// " (name=value ...)": what varies between the plan's runs, as `run` has it.
std::string which_run(const sweep::PlannedRun& run, const std::vector<std::string>& varying) {
  std::string which;
  for (const std::string& name : varying) {
    which += (which.empty() ? "" : " ") + name + "=" + sweep::param_text(run.params, name);
  }
  return which.empty() ? "" : " (" + which + ")";
}

/// Parses each planned run's flags as `dlscale train|commbench` would, with
/// a parser of their own that runs nothing: a value the command refuses (an
/// unknown --strategy or --compress, a number out of its range, --epochs
/// with --steps) fails the plan in one line naming the run, before any run
/// starts, instead of failing that run when its turn comes.
void check_run_flags(const std::vector<sweep::PlannedRun>& plan) {
  const std::string binary = "dlscale";  // where the command's own words start
  std::vector<const sweep::Params*> all;
  for (const sweep::PlannedRun& run : plan) all.push_back(&run.params);
  const std::vector<std::string> varying = sweep::varying_params(all, {});
  for (const sweep::PlannedRun& run : plan) {
    const std::string kind = sweep::param_text(run.params, "kind");
    if (run.skipped() || kind == "external") continue;
    const std::vector<std::string> argv = sweep::build_command(run.params, binary, "/dev/null");
    // CLI11 takes the arguments last first, without the program's name.
    std::vector<std::string> args(argv.rbegin(), std::find(argv.rbegin(), argv.rend(), binary));
    CLI::App app;
    launch::TrainJobOptions train;
    CommbenchFlags bench;
    CLI::App* command = app.add_subcommand(kind == "commbench" ? "commbench" : "train");
    if (kind == "commbench") add_commbench_flags(command, bench);
    if (kind != "commbench") add_train_flags(command, train);
    check_number_flags(app);  // numbers are refused in the command line's words
    try {
      app.parse(args);
    } catch (const CLI::ConversionError& e) {
      throw Error(fmt::format("run {} of the plan{}: {}", run.index, which_run(run, varying),
                              explain_conversion_error(e.what())));
    } catch (const std::exception& e) {
      throw Error(
          fmt::format("run {} of the plan{}: {}", run.index, which_run(run, varying), e.what()));
    }
  }
}

int run(CLI::App& app, const SweepFlags& f) {
  sweep::SweepSpec spec = sweep::load_sweep_file(f.file);
  if (!f.launcher.empty()) override_parameter(spec, "launcher", sweep::Value(f.launcher));
  if (f.max_jobs != 0) override_parameter(spec, "max-jobs", sweep::Value(static_cast<double>(f.max_jobs)));
  const std::vector<sweep::PlannedRun> plan = sweep::plan_sweep(
      spec, {option_names(app, "train"), option_names(app, "commbench")});
  check_run_flags(plan);
  if (f.dry_run) {
    std::cout << "sweep '" << spec.name << "' from " << f.file << "\n";
    sweep::print_plan(std::cout, plan);
    return kExitOk;
  }
  const sweep::Rerun rerun = f.rerun == "all" ? sweep::Rerun::kAll
                             : f.rerun == "failed" ? sweep::Rerun::kFailed
                                                   : sweep::Rerun::kNone;
  check_output_paths({{"--html", f.html}}, {{"--db", f.db, ""}, {"sweep", f.file, ""}});
  sweep::ResultsStore store(f.db);

  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  sweep::SweepRunOptions o;
  o.sweep_name = spec.name;
  o.dlscale_binary = std::filesystem::canonical(self_executable()).string();
  o.output_dir = f.output_dir;
  o.rerun = rerun;
  o.interleave = f.interleave;
  o.live_progress = f.progress == "live" || (f.progress == "auto" && isatty(STDOUT_FILENO));
  o.out = &std::cout;
  o.keep_going = [] { return g_sweep_signal == 0; };
  o.host = host;
  o.pid = getpid();
  o.versions = {{"dlscale", build_info().version}, {"git_revision", build_info().git_revision}};
  const sweep::SweepOutcome outcome = sweep::run_sweep(plan, store, o);

  if (!f.html.empty() && store.runs(spec.name, false).empty()) {
    std::cout << "HTML report: not written, the store holds no run of sweep '" << spec.name << "'\n";
  } else if (!f.html.empty()) {
    const auto runs = store.runs(spec.name);
    report::HtmlOptions h;
    h.title = "dlscale report: " + spec.name;
    h.source = f.db;
    write_file_atomic(f.html, report::render_html(runs, h));
    std::cout << "HTML report: " << f.html << "\n";
  }
  if (outcome.interrupted) return 128 + (g_sweep_signal ? g_sweep_signal.load() : SIGINT);
  return outcome.failed > 0 ? kExitRunsFailed : kExitOk;
}

}  // namespace

void add_sweep_command(CLI::App& app) {
  auto f = std::make_shared<SweepFlags>();
  CLI::App* cmd = app.add_subcommand(
      "sweep",
      "Plan and run a scaling study from a YAML sweep file (docs/sweep-files.md). Every run is stored in the "
      "results store as it finishes; running the same file again skips runs already done.");
  cmd->add_option("file", f->file, "The sweep file (YAML)")->required();
  cmd->add_option("--db", f->db, "Results store (SQLite file; created if missing)")->capture_default_str();
  cmd->add_flag("--dry-run", f->dry_run, "Print the plan as a table and run nothing");
  cmd->add_option("--rerun", f->rerun,
                  "none: skip runs already in the store; failed: run again those that did not complete; all: run "
                  "everything again")
      ->check(CLI::IsMember({"none", "failed", "all"}))
      ->capture_default_str();
  cmd->add_flag(
      "--interleave", f->interleave,
      "Run the repeats in rounds: repeat 1 of each run, then repeat 2 of each, and so on, over "
      "consecutive runs on the same emulated cluster (or on none), so that a slow spell of a "
      "shared machine falls on one repeat of several runs, not on every repeat of one (launcher "
      "slurm: no effect)");
  cmd->add_option("--output-dir", f->output_dir,
                  "Each repeat's log and JSON record go to DIR/<sweep name>/")
      ->capture_default_str();
  cmd->add_option("--progress", f->progress,
                  "auto: one live status line on a terminal, plain lines otherwise; live; plain")
      ->check(CLI::IsMember({"auto", "live", "plain"}))
      ->capture_default_str();
  cmd->add_option("--html", f->html, "After the sweep, write the HTML report of its runs here");
  cmd->add_option("--launcher", f->launcher,
                  "Run every run with this launcher, overriding the file's 'launcher': local | mpirun | srun | "
                  "cluster | slurm (each repeat a batch job; docs/slurm.md)");
  cmd->add_option("--max-jobs", f->max_jobs,
                  "launcher slurm: at most this many of the sweep's jobs queued or running at once, overriding "
                  "the file's 'max-jobs' (default 4)");
  cmd->callback([&app, f] {
    const int code = run(app, *f);
    if (code != kExitOk) throw ExitWith{code};
  });
}

}  // namespace dlscale::cli
