#pragma once
// The loss an optimizer's step() returns: its closure evaluated with
// gradients on, as LibTorch's optimizers do; undefined without a closure.
#include <torch/torch.h>

namespace dlscale::train {

inline torch::Tensor closure_loss(const torch::optim::Optimizer::LossClosure& closure) {
  if (!closure) return {};
  at::AutoGradMode enable_grad(true);
  return closure();
}

}  // namespace dlscale::train
