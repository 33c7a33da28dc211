#pragma once
// Runs a planned sweep: each run's repeats as child processes with a time
// limit and captured output, results into the store as they finish, resume
// by run key, failure isolation and the DLBS out-of-memory rule
// (docs/sweep-files.md).
#include <functional>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "sweep/planner.h"
#include "sweep/results_store.h"

namespace dlscale::sweep {

enum class Rerun { kNone, kFailed, kAll };

struct SweepRunOptions {
  std::string sweep_name;
  std::string dlscale_binary;               ///< the program run for kind dlscale
  std::string output_dir = "dlscale-runs";  ///< per-run logs and records go to output_dir/<sweep>/
  Rerun rerun = Rerun::kNone;
  bool live_progress = false;  ///< one rewritten status line (a terminal); else plain lines
  std::ostream* out = nullptr;  ///< progress and summary lines
  /// Polled while runs execute; false stops the sweep (Ctrl-C).
  std::function<bool()> keep_going;
  std::string host;
  long long pid = 0;
  nlohmann::json versions = nlohmann::json::object();
};

struct SweepOutcome {
  int planned = 0;
  int executed = 0;         ///< runs started by this invocation
  int completed = 0;        ///< of those, completed
  int failed = 0;           ///< failed, timed out or out of memory
  int skipped = 0;          ///< by the plan or the out-of-memory rule
  int already_done = 0;     ///< found in the store and not re-run
  bool interrupted = false;
};

/// Runs every run of `plan` that needs running. Never throws for a failing
/// run (it is stored as failed with its reason); throws dlscale::Error only
/// for problems of the sweep itself (store or output directory unusable).
SweepOutcome run_sweep(const std::vector<PlannedRun>& plan, ResultsStore& store, const SweepRunOptions& options);

/// The parameters of repeat `repeat` (1-based) of a run. A dlscale run that
/// evaluates (target-accuracy, epochs, eval-every or eval-every-steps) takes
/// a new seed for each repeat, as MLPerf's runs of one benchmark differ in
/// seed: repeat k of seed s (train's default 42 when unset) runs seed
/// s + 1000·(k − 1), clear of a small seed list swept as a variable. Other
/// runs repeat exactly (timing noise is what their repeats measure).
Params repeat_params(const Params& params, int repeat);
inline constexpr long long kDefaultSeed = 42;  ///< train's --seed default

/// The argv of one repeat: `dlscale train …` (possibly under mpirun/srun)
/// or the external command with `${param}` substituted. `record_path` is
/// where a dlscale run writes its JSON record.
std::vector<std::string> build_command(const Params& params, const std::string& dlscale_binary,
                                       const std::string& record_path);

/// Splits a command template into words like a shell would (spaces, '…',
/// "…", backslash) without running one.
std::vector<std::string> split_command(const std::string& text);

/// Metrics of one successful repeat from the dlscale JSON record or, for an
/// external run, from the throughput pattern in its log. Throws
/// dlscale::Error naming what is missing.
std::map<std::string, double> extract_metrics(const Params& params, const std::string& record_json,
                                              const std::string& log_text);

}  // namespace dlscale::sweep
