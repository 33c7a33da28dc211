#pragma once
// The empirical model of large-batch training (McCandlish et al. 2018, *An
// Empirical Model of Large-Batch Training*, eq. 2.11-2.12): training to a
// target at global batch B takes
//   S(B) = S_min (1 + B_noise / B)  steps   and   E(B) = E_min (1 + B / B_noise)  epochs,
// with S·B = E·D for a training set of D samples, so E_min = S_min·B_noise / D
// and B_noise (the critical batch, B_crit) is where both are twice their
// minimum. `report --type batch` fits it to measured steps to target;
// `predict --tta` builds it from one run and its gradient noise scale
// (docs/predict.md, "Time to accuracy"). Pure arithmetic, no LibTorch.
#include <string>
#include <vector>

namespace dlscale {

struct BatchModel {
  double s_min = 0;              ///< steps at an infinite batch
  double b_noise = 0;            ///< the critical batch
  double samples_per_epoch = 0;  ///< D
  double steps(double batch) const { return s_min * (1 + b_noise / batch); }
  double epochs(double batch) const { return steps(batch) * batch / samples_per_epoch; }
  double e_min() const { return s_min * b_noise / samples_per_epoch; }
};

/// The model through one run that reached its target in `epochs0` epochs at
/// global batch `batch0`, taking `b_noise` (a measured noise scale,
/// B_simple) as the critical batch: E_min = epochs0 / (1 + batch0 / b_noise).
/// Throws dlscale::Error unless every input is finite and > 0.
BatchModel model_from_run(double epochs0, double batch0, double b_noise, double samples_per_epoch);

/// A measured point: steps to target at a global batch.
struct StepsPoint {
  double batch = 0;
  double steps = 0;
};

/// The least-squares fit of S = S_min + S_min·B_noise / B (linear in 1/B),
/// weighted by 1/S² so each point counts by its relative error.
struct BatchFit {
  bool ok = false;
  std::string why;                ///< when not ok: why the fit has no meaning
  BatchModel model;               ///< when ok
  double rms_relative_error = 0;  ///< of the fitted S at the points
};

/// Fits `points` (two or more distinct batches, every value > 0). Not ok,
/// with the reason, when there are too few points or the fitted S_min or
/// B_noise is not positive (steps that do not fall with the batch, or fall
/// as 1/B or faster, so the curve has not bent yet): the fit says so
/// instead of clamping.
BatchFit fit_steps(const std::vector<StepsPoint>& points, double samples_per_epoch);

}  // namespace dlscale
