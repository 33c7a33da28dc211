#pragma once
// `dlscale predict --tta`: time to accuracy at N workers (docs/predict.md,
// "Time to accuracy"). One measured run that reached its target gives the
// epochs E0 at its global batch B0 and its gradient noise scale B_simple;
// McCandlish et al.'s model (core/batch_model.h) turns them into steps to
// target at any global batch, and the scaling model's step time at each N
// into hours to target, its speedup, the fastest N and the cheapest N per
// strategy. No LibTorch.
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "core/batch_model.h"
#include "predict/predictor.h"

namespace dlscale::predict {

/// What a run that reached its target says about training to it.
struct TtaRun {
  std::string source;  ///< the record's path
  std::string model;
  std::string metric;  ///< the target's metric (top1, token_acc, hr10, ...)
  double target = 0;
  double epochs = 0;        ///< E0
  double global_batch = 0;  ///< B0
  double b_simple = 0;      ///< over training (moving average); 0 = none usable
  double b_adam = 0;        ///< Adam's preconditioned noise scale; 0 = none usable
  bool adam_measured = false;  ///< the record has one, usable or not (undefined, <= 0)
  /// At the final weights (train --noise-final); 0 = none usable.
  double final_b_simple = 0, final_b_adam = 0;
  bool final_measured = false;  ///< the record has results.noise.final, usable or not
  /// Which one model_fit takes: B_simple, B_adam, final B_simple or final B_adam.
  std::string noise = "B_simple";
  double samples_per_epoch = 0;
  BatchModel model_fit;  ///< through (B0, E0) with B_noise = that noise scale
};

/// results.convergence of a train record (an object), or null when it has
/// none (no target, evaluation or convergence section).
const nlohmann::json& convergence_of(const nlohmann::json& record);

/// Which noise scale --tta's model takes (--tta-noise): "auto" (the
/// final weights' where the record has them, else the one over training;
/// of each, Adam's preconditioned one where the record has it, else
/// B_simple), "simple", "adam", "final" or "final-adam".
const std::vector<std::string>& tta_noise_kinds();

/// Reads a `dlscale train --json` record; throws dlscale::Error (one line
/// naming `what` and the field) unless it reached its target and holds a
/// finite, positive noise scale (train --noise-scale) of the kind `noise`
/// asks for.
TtaRun tta_run_from_record(const nlohmann::json& record, const std::string& what,
                           const std::string& noise = "auto");

struct TtaPoint {
  long long workers = 0;
  double global_batch = 0;
  double epochs = 0, steps = 0;
  double step_s = 0;
  double time_s = 0;        ///< steps x step time: training only (no evaluation, no start-up)
  double speedup = 0;       ///< one worker's time / this time
  double device_hours = 0;  ///< workers x time
};

struct TtaStrategy {
  std::string label;
  std::vector<TtaPoint> points;      ///< one per N, in order
  size_t fastest = 0, cheapest = 0;  ///< indices into points
};

struct TtaPrediction {
  TtaRun run;
  double batch_per_worker = 0;  ///< weak scaling: B = N x this, up to the cap
  double max_global_batch = 0;  ///< 0 = none; past it the per-worker batch shrinks
  double t1_s = 0;              ///< one worker's step at min(batch, cap)
  std::vector<TtaStrategy> strategies;
};

/// Time to target of every strategy at every N of `options.workers` (weak
/// scaling at `options.batch` per worker, else the workload's, with the
/// global batch held at `max_global_batch` once N x batch passes it).
/// Throws dlscale::Error as predict() does, and when some N exceeds the
/// capped global batch (less than one sample per worker).
TtaPrediction predict_tta(const Workload& w, const Network& n,
                          const std::vector<StrategySpec>& strategies,
                          const PredictOptions& options, const TtaRun& run,
                          double max_global_batch);

/// The model's lines and a table per strategy with its fastest and cheapest N.
void print_tta(const TtaPrediction& p, std::ostream& out);
/// The "tta" section of the prediction record.
nlohmann::json tta_json(const TtaPrediction& p);
/// A page: time to target and its speedup against N, and the tables; N
/// lists longer than about 24 (`workers`, in order) are thinned on it.
std::string tta_html(const TtaPrediction& p, const std::vector<long long>& workers,
                     const std::vector<std::string>& header);

}  // namespace dlscale::predict
