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

/// The squared global L2 norm of `grads` (undefined ones skipped, sparse
/// ones coalesced), then over the workers by `sum_over_workers` when
/// given. `exact`: summed in float64 from the elements, as clip_grad_norm
/// sums it (a copy of every gradient); else each tensor's dot product with
/// itself in its own type, no copy (about 1e-6 relative; --noise-scale).
double squared_norm(const std::vector<torch::Tensor>& grads,
                    const std::function<double(double)>& sum_over_workers = nullptr,
                    bool exact = true);

/// One tensor's dot product with itself (sparse: its coalesced values), no
/// copy where its elements are dense in memory.
torch::Tensor self_dot(const torch::Tensor& grad);

/// Clips `grads` (undefined ones skipped) in place and returns the global
/// norm before clipping. The squares are summed in float64 from the
/// elements up: a float32 norm rounds by the kernel's vector width and by
/// how the gradient is cut (whole tensors, or zero's pieces of them), and
/// on an AVX2-only CPU that moved the coefficient enough to part zero's
/// weights from allreduce's by 76 times the tests' rtol (issue 41).
/// `sum_over_workers`, when given, returns the sum over the workers of this
/// worker's value: for a strategy whose `grads` are its shard of the
/// gradient (sum_doubles_over_workers does it exactly).
double clip_grad_norm(const std::vector<torch::Tensor>& grads, double max_norm,
                      const std::function<double(double)>& sum_over_workers = nullptr);

/// The sum over the workers of `comm` of each one's `value`, the same to the
/// last bit on every worker and in every rank order: each worker's float64
/// travels as two float32 (its value and the rest) in its own slots of one
/// allreduce, where only zeros are added to it, and the sum is taken in
/// float64 in rank order. `allreduce_sum` sums a float32 tensor over them.
double sum_doubles_over_workers(double value, int rank, int world,
                                const std::function<void(torch::Tensor&)>& allreduce_sum);

}  // namespace dlscale::dp
