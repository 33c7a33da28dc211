#pragma once
// The time-to-accuracy report (docs/reports.md): runs that evaluated
// (results.convergence in their records, conv_* metrics in the store)
// grouped by configuration and worker count, with MLPerf's olympic mean of
// the time to accuracy over seeds and repeats, and the speedup in time to
// train against the fewest workers.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "report/report.h"
#include "sweep/results_store.h"

namespace dlscale::report {

/// One training run as the report counts it: a completed repeat whose
/// metrics hold its convergence (conv_*).
struct TtaRun {
  const sweep::RunRecord* run = nullptr;
  const sweep::RepeatRecord* repeat = nullptr;
  std::string status;                        ///< success | aborted | "" (no target)
  std::optional<double> time_to_accuracy_s;  ///< success only
  std::optional<double> epochs_to_target;    ///< success only
  std::optional<double> final_accuracy;      ///< fraction, of accuracy_metric(); none without an evaluation
};

/// One row of the report: the runs of one configuration on one worker
/// count, whatever their seed or repeat.
struct TtaRow {
  std::vector<std::pair<std::string, std::string>> labels;  ///< (model, varying params)
  int workers = 0;
  long long global_batch = 0;
  std::vector<TtaRun> runs;
  int successes = 0, aborted = 0;
  std::optional<double> time_to_accuracy_s;  ///< olympic mean over the successful runs
  double time_min_s = 0, time_max_s = 0;     ///< over the successful runs
  std::optional<double> epochs_to_target;    ///< mean over the successful runs
  std::optional<double> final_accuracy;      ///< mean over the runs that evaluated
  std::optional<double> speedup;             ///< base time / this time
  int base_workers = 0;                      ///< the row the speedup is against
};

/// The rows of every run with a convergence section: grouped by the
/// parameters that vary (other than seed and output paths), one row per
/// worker count, ascending within a configuration. Empty when no run
/// evaluated. The rows point into `runs`.
std::vector<TtaRow> tta_rows(const std::vector<sweep::RunRecord>& runs);

/// Table: a row per TtaRow; data: the same with plain numbers. Throws
/// dlscale::Error naming the selection's sweeps when no run evaluated.
Report tta_report(const std::vector<sweep::RunRecord>& runs);

/// The run a chart draws for a row: the successful run with the median
/// time to accuracy (the lower of the middle two); when none succeeded, the
/// run with the median final accuracy; else the first run.
const TtaRun& representative_run(const TtaRow& row);

/// One evaluation from a record's results.convergence.evals.
struct EvalPoint {
  double epoch = 0;
  double run_seconds = 0;  ///< run time at its end
  double accuracy = 0;     ///< fraction, of accuracy_metric()
};

/// The evaluations in a repeat's JSON record; empty when it has none.
std::vector<EvalPoint> convergence_evals(const sweep::RepeatRecord& repeat);

}  // namespace dlscale::report
