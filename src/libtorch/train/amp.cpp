#include "libtorch/train/amp.h"

#include "core/enum_names.h"
#include "core/error.h"

namespace dlscale::train {
namespace {

/// Whether any of `grads` holds an inf or NaN, after dividing them all by
/// `scale` (one device-to-host read for the whole set).
bool unscale_found_inf(std::vector<torch::Tensor>& grads, double scale) {
  if (grads.empty()) return false;
  const auto options = torch::TensorOptions().dtype(torch::kFloat32).device(grads[0].device());
  torch::Tensor found = torch::zeros({1}, options);
  if (grads[0].is_cuda()) {
    const torch::Tensor inv = torch::full({1}, 1.0 / scale, options);
    at::_amp_foreach_non_finite_check_and_unscale_(grads, found, inv);
  } else {
    for (auto& g : grads) {
      g.mul_(1.0 / scale);
      found.add_(g.isfinite().all().logical_not().to(torch::kFloat32));
    }
  }
  return found.item<float>() > 0;
}

}  // namespace

torch::ScalarType amp_dtype(AmpMode mode) {
  switch (mode) {
    case AmpMode::kBf16: return torch::kBFloat16;
    case AmpMode::kFp16: return torch::kFloat16;
    case AmpMode::kNone: break;
  }
  return torch::kFloat32;
}

LossScaler::LossScaler(bool enabled, LossScalerOptions options)
    : enabled_(enabled), options_(options), scale_(enabled ? options.init_scale : 1.0) {}

torch::Tensor LossScaler::scale_loss(const torch::Tensor& loss) const {
  return enabled_ ? loss * scale_ : loss;
}

bool LossScaler::unscale(const std::vector<torch::Tensor>& params) {
  if (!enabled_) return true;
  std::vector<torch::Tensor> grads;
  for (const auto& p : params) {
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  torch::NoGradGuard no_grad;
  if (unscale_found_inf(grads, scale_)) {
    scale_ *= options_.backoff_factor;
    good_steps_ = 0;
    ++skipped_;
    return false;
  }
  if (++good_steps_ >= options_.growth_interval) {
    scale_ *= options_.growth_factor;
    good_steps_ = 0;
  }
  return true;
}

}  // namespace dlscale::train
