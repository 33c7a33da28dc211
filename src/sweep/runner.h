#pragma once
// Runs a planned sweep: each run's repeats as child processes with a time
// limit and captured output, results into the store as they finish, resume
// by run key, failure isolation and the DLBS out-of-memory rule
// (docs/sweep-files.md).
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "sweep/command.h"
#include "sweep/planner.h"
#include "sweep/record_metrics.h"
#include "sweep/results_store.h"

namespace dlscale::sweep {

enum class Rerun { kNone, kFailed, kAll };

struct SweepRunOptions {
  std::string sweep_name;
  std::string dlscale_binary;               ///< the program run for kind dlscale
  std::string output_dir = "dlscale-runs";  ///< per-run logs and records go to output_dir/<sweep>/
  Rerun rerun = Rerun::kNone;
  bool live_progress = false;  ///< one rewritten status line (a terminal); else plain lines
  /// Run consecutive local runs of one emulated cluster (or of none) in
  /// rounds: repeat 1 of each, then repeat 2 of each, ... (sweep --interleave).
  bool interleave = false;
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

}  // namespace dlscale::sweep
