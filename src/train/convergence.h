#pragma once
// What a run learned: its evaluations, whether it reached its target, and
// the MLPerf-style time to accuracy (docs/convergence.md), with their JSON
// and console forms.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "core/metric_spec.h"
#include "train/recipe.h"

namespace dlscale::train {

struct EvalRecord {
  int64_t step = 0;       ///< training steps done before it
  double epoch = 0;       ///< epochs done before it (steps / steps per epoch)
  /// The task's metrics (name, value), in its order, e.g. ("top1", fraction of the test set).
  std::vector<std::pair<std::string, double>> metrics;
  int64_t samples = 0;    ///< test samples evaluated over all ranks
  double seconds = 0;     ///< its own wall time
  double run_seconds = 0; ///< run time at its end, since run start (earlier runs included when resumed)
  /// The value of metric `name` (0 when it has none).
  double metric(const std::string& name) const;
};

struct ConvergenceSummary {
  bool enabled = false;          ///< the run evaluated (epochs, eval interval or target given)
  std::vector<MetricSpec> metrics; ///< the task's; the target is on the first
  double target = 0;             ///< the first metric's value to reach (a fraction); 0 = none
  std::string status;            ///< success | aborted ("" without a target)
  double init_seconds = 0;       ///< process start of the trainer → run start (MLPerf init)
  double run_seconds = 0;        ///< run start → run stop: time to accuracy on success
  double eval_seconds = 0;       ///< all evaluations
  double checkpoint_seconds = 0; ///< all checkpoint writes
  int64_t steps_done = 0;        ///< training steps run, earlier runs included
  double epochs_done = 0;
  double epochs_to_target = 0;   ///< epochs at the evaluation that reached the target (0: not reached)
  int64_t resumed_from_step = 0; ///< > 0: this run continued a checkpoint
  double lr_peak = 0;            ///< the schedule's peak (after linear scaling)
  int64_t lr_warmup_steps = 0;
  std::vector<EvalRecord> evals;
};

/// The recipe, as recorded under "inputs" (with the epoch length used).
nlohmann::json recipe_json(const RecipeOptions& recipe);
nlohmann::json to_json(const EvalRecord& eval);
/// The record `to_json` writes: every key apart from the fixed ones is a metric.
EvalRecord eval_from_json(const nlohmann::json& j);
/// Whether `key` is one of an evaluation's fixed fields (not a metric).
bool is_eval_field(const std::string& key);
nlohmann::json to_json(const ConvergenceSummary& c);

/// "eval  epoch 2.00  top-1 88.12%  top-5 99.71%  (10000 samples, 0.84 s)"
void print_eval_line(std::ostream& out, const EvalRecord& eval, const std::vector<MetricSpec>& metrics);
/// One progress line: epoch, step, loss, last accuracy, rate, ETA.
void print_progress_line(std::ostream& out, int64_t step, int64_t total_steps,
                         int64_t steps_per_epoch, double loss, double lr,
                         const ConvergenceSummary& c, double seconds_per_step);
/// Status, time to accuracy and the evaluation that reached it.
void print_convergence_summary(std::ostream& out, const ConvergenceSummary& c);

}  // namespace dlscale::train
