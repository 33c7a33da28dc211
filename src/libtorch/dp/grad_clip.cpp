#include "libtorch/dp/grad_clip.h"

#include <cmath>

namespace dlscale::dp {

torch::Tensor self_dot(const torch::Tensor& grad) {
  torch::NoGradGuard no_grad;
  torch::Tensor g = grad.is_sparse() ? grad.coalesce().values() : grad;
  // A dense layout (channels-last too) is read as one run of elements.
  g = g.is_non_overlapping_and_dense() ? g.as_strided({g.numel()}, {1}) : g.reshape({-1});
  return at::dot(g, g);
}

double squared_norm(const std::vector<torch::Tensor>& grads,
                    const std::function<double(double)>& sum_over_workers, bool exact) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> squares;
  for (const auto& grad : grads) {
    if (!grad.defined() || grad.numel() == 0) continue;
    if (!exact) {
      squares.push_back(self_dot(grad).to(torch::kFloat64));
      continue;
    }
    const torch::Tensor g = grad.is_sparse() ? grad.coalesce().values() : grad;
    // Each square is rounded once in float32 (no copy of a float32 g, and
    // no overflow of a half one), the same however g is cut; only their sum
    // needs float64.
    squares.push_back(g.to(torch::kFloat32).square().sum(torch::kFloat64));
  }
  // One read back to the host, then the workers' sum.
  double total = squares.empty() ? 0.0 : torch::stack(squares).sum().cpu().item<double>();
  if (sum_over_workers) total = sum_over_workers(total);
  return total;
}

double clip_grad_norm(const std::vector<torch::Tensor>& grads, double max_norm,
                      const std::function<double(double)>& sum_over_workers) {
  const double norm = std::sqrt(squared_norm(grads, sum_over_workers));
  torch::NoGradGuard no_grad;
  const double coefficient = max_norm / (norm + 1e-6);
  if (coefficient < 1.0) {
    for (const auto& g : grads) {
      if (g.defined()) g.mul_(coefficient);
    }
  }
  return norm;
}

double sum_doubles_over_workers(double value, int rank, int world,
                                const std::function<void(torch::Tensor&)>& allreduce_sum) {
  // Communicators reduce 16- and 32-bit floats; x = hi + lo to 2^-48 of x.
  const auto hi = static_cast<float>(value);
  const auto lo = static_cast<float>(value - static_cast<double>(hi));
  torch::Tensor slots = torch::zeros({2 * static_cast<int64_t>(world)}, torch::kFloat32);
  slots[2 * rank] = hi;
  slots[2 * rank + 1] = lo;
  allreduce_sum(slots);
  const float* v = slots.data_ptr<float>();
  double sum = 0;
  for (int r = 0; r < world; ++r) sum += static_cast<double>(v[2 * r]) + static_cast<double>(v[2 * r + 1]);
  return sum;
}

}  // namespace dlscale::dp
