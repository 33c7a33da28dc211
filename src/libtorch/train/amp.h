#pragma once
// Mixed precision (docs/gpu.md, "Mixed precision"): --amp bf16|fp16 runs the
// forward pass under autocast; fp16 adds dynamic loss scaling, as PyTorch's
// GradScaler: the loss is multiplied by a scale before backward, gradients
// are divided by it after they are combined, and a step whose gradients hold
// an inf or NaN is skipped and halves the scale; 2000 good steps in a row
// double it.
#include <cstdint>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "train/amp_mode.h"

namespace dlscale::train {

/// The autocast dtype of `mode` (kFloat32 for none).
torch::ScalarType amp_dtype(AmpMode mode);

struct LossScalerOptions {
  double init_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
};

class LossScaler {
 public:
  /// Disabled: scale() returns the loss and unscale() accepts every step.
  explicit LossScaler(bool enabled, LossScalerOptions options = {});

  bool enabled() const { return enabled_; }
  double scale() const { return scale_; }
  int64_t skipped_steps() const { return skipped_; }

  /// loss × scale (the loss itself when disabled).
  torch::Tensor scale_loss(const torch::Tensor& loss) const;
  /// Divides every defined gradient of `params` by the scale, in place, and
  /// updates the scale. Returns false when a gradient held an inf or NaN:
  /// the caller must skip the optimizer step (counted in skipped_steps()).
  bool unscale(const std::vector<torch::Tensor>& params);

 private:
  bool enabled_;
  LossScalerOptions options_;
  double scale_;
  int64_t good_steps_ = 0;
  int64_t skipped_ = 0;
};

}  // namespace dlscale::train
