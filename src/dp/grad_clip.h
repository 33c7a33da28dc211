#pragma once
// --clip-grad-norm (docs/convergence.md, "Gradient clipping"): the
// gradients are scaled so that their global L2 norm, over every parameter
// and after the workers' average, is at most max_norm, as PyTorch's
// torch.nn.utils.clip_grad_norm_ does (coefficient max_norm / (norm + 1e-6),
// applied when below 1).
#include <torch/torch.h>

#include <functional>
#include <vector>

namespace dlscale::dp {

/// Clips `grads` (undefined ones skipped) in place and returns the global
/// norm before clipping. `sum_over_workers`, when given, sums a one-element
/// float32 tensor over the workers: for a strategy whose `grads` are this
/// worker's shard of the gradient (the norm's square is summed over shards).
double clip_grad_norm(const std::vector<torch::Tensor>& grads, double max_norm,
                      const std::function<void(torch::Tensor&)>& sum_over_workers = nullptr);

}  // namespace dlscale::dp
