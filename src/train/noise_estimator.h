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

}  // namespace dlscale::train
