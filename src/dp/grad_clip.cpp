#include "dp/grad_clip.h"

#include <cmath>

namespace dlscale::dp {

double clip_grad_norm(const std::vector<torch::Tensor>& grads, double max_norm,
                      const std::function<void(torch::Tensor&)>& sum_over_workers) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> squares;
  for (const auto& g : grads) {
    if (g.defined() && g.numel() > 0) squares.push_back(g.norm(2).to(torch::kFloat64).square());
  }
  // One read back to the host, after the workers' sum.
  torch::Tensor total = squares.empty() ? torch::zeros({1}, torch::kFloat64)
                                        : torch::stack(squares).sum().reshape({1}).cpu();
  if (sum_over_workers) {
    // Communicators reduce 16- and 32-bit floats: the squares summed in
    // float64 here, their sum over the workers in float32.
    torch::Tensor shared = total.to(torch::kFloat32);
    sum_over_workers(shared);
    total = shared.to(torch::kFloat64);
  }
  const double norm = std::sqrt(total.item<double>());
  const double coefficient = max_norm / (norm + 1e-6);
  if (coefficient < 1.0) {
    for (const auto& g : grads) {
      if (g.defined()) g.mul_(coefficient);
    }
  }
  return norm;
}

}  // namespace dlscale::dp
