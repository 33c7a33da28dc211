#pragma once
// The gradient noise scale B_simple = tr(Σ)/|G|² (McCandlish et al. 2018,
// "An Empirical Model of Large-Batch Training", appendix A.1) from squared
// gradient norms at two batch sizes, which data-parallel training has for
// free: each worker's gradient over its own samples (B_small) and the
// workers' average (B_big). Torch-free (docs/convergence.md, "Gradient
// noise scale").
#include <cmath>
#include <cstdint>
#include <limits>

namespace dlscale::train {

class NoiseEstimator {
 public:
  /// `b_small` < `b_big` samples; `decay` of the moving averages in (0, 1).
  NoiseEstimator(double b_small, double b_big, double decay = 0.95)
      : b_small_(b_small), b_big_(b_big), decay_(decay) {}

  /// One step: `small_sq` the mean of |g|² over gradients of b_small
  /// samples, `big_sq` |g|² of the gradient over b_big samples.
  void add(double small_sq, double big_sq) {
    last_g2_ = (b_big_ * big_sq - b_small_ * small_sq) / (b_big_ - b_small_);  // unbiased |G|²
    last_s_ = (small_sq - big_sq) / (1.0 / b_small_ - 1.0 / b_big_);           // unbiased tr(Σ)
    g2_ = decay_ * g2_ + (1 - decay_) * last_g2_;
    s_ = decay_ * s_ + (1 - decay_) * last_s_;
    ++steps_;
  }
  int64_t steps() const { return steps_; }
  double b_small() const { return b_small_; }
  double b_big() const { return b_big_; }
  double decay() const { return decay_; }
  /// The moving averages, corrected for their start at 0 (NaN before a step).
  double gradient_sq() const { return corrected(g2_); }
  double trace_sigma() const { return corrected(s_); }
  /// tr(Σ)/|G|² of the moving averages; NaN while |G|² is not positive
  /// (early, or where the gradient is mostly noise): undefined, not clamped.
  double b_simple() const {
    const double g2 = gradient_sq();
    return g2 > 0 ? trace_sigma() / g2 : std::numeric_limits<double>::quiet_NaN();
  }
  /// This step's own estimates, before averaging.
  double step_gradient_sq() const { return last_g2_; }
  double step_trace_sigma() const { return last_s_; }

 private:
  double corrected(double ema) const {
    if (steps_ == 0) return std::numeric_limits<double>::quiet_NaN();
    return ema / (1 - std::pow(decay_, static_cast<double>(steps_)));
  }

  double b_small_, b_big_, decay_;
  double g2_ = 0, s_ = 0, last_g2_ = 0, last_s_ = 0;
  int64_t steps_ = 0;
};

/// The noise scale at fixed weights (--noise-final): M >= 2 gradients g_t of
/// the same weights, each over `batch` samples, give unbiased estimates from
/// every pair of them (E|g_t|^2 = |G|^2 + tr(Σ)/batch, and the M(M-1)
/// cross terms of |Σ g_t|^2 have mean |G|^2):
///   |G|^2 ≈ (|Σ g_t|^2 - Σ |g_t|^2) / (M (M - 1)),
///   tr(Σ) ≈ batch (Σ |g_t|^2 / M - |G|^2).
/// The same weights let every pair count, where a moving average over
/// training pairs each gradient with its own step's alone.
struct FixedWeightsNoise {
  double gradient_sq = std::numeric_limits<double>::quiet_NaN();
  double trace_sigma = std::numeric_limits<double>::quiet_NaN();
  /// tr(Σ)/|G|^2; NaN while |G|^2 is not positive (undefined, not clamped).
  double b_simple() const {
    return gradient_sq > 0 ? trace_sigma / gradient_sq : std::numeric_limits<double>::quiet_NaN();
  }
};

/// From `sum_sq` = |Σ g_t|^2 and `sq_sum` = Σ |g_t|^2 over `m` gradients of
/// `batch` samples; both NaN for m < 2.
inline FixedWeightsNoise fixed_weights_noise(double sum_sq, double sq_sum, int64_t m,
                                             double batch) {
  FixedWeightsNoise n;
  if (m < 2) return n;
  const auto md = static_cast<double>(m);
  n.gradient_sq = (sum_sq - sq_sum) / (md * (md - 1));
  n.trace_sigma = batch * (sq_sum / md - n.gradient_sq);
  return n;
}

}  // namespace dlscale::train
