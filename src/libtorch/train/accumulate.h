#pragma once
// Gradient accumulation (--accumulate K, docs/training.md): a step's K
// micro-batches each run forward and backward on this worker; the first
// K-1 backward passes keep their gradients here (the strategy's hooks stand
// aside, libtorch/dp/gradient_sync.h), and the last one carries the sum of all K
// through the strategy, so every strategy exchanges once per step what one
// micro-batch's backward would, with the whole step's gradient in it.
#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "libtorch/train/train_result.h"

namespace dlscale::train {

/// Takes every parameter's .grad out (undefined where a parameter has none),
/// leaving .grad undefined: the earlier micro-batches' summed gradients.
std::vector<torch::Tensor> take_gradients(const std::vector<torch::Tensor>& params);

/// `loss` plus a term that is 0 and whose gradient with respect to
/// params[i] is taken[i] (skipped where undefined). The term never reads
/// the parameters, so it holds for parameters whose storage a strategy has
/// freed (zero stage 3); a backward pass from the sum gives each parameter
/// its own gradient plus taken[i] in one accumulation, which is what the
/// strategy's hooks see.
torch::Tensor with_gradients(const torch::Tensor& loss, const std::vector<torch::Tensor>& params,
                             const std::vector<torch::Tensor>& taken);

/// The phase clock's marks in a step of `micro_batches` (3 per micro-batch:
/// data, forward, backward; then the exchange, the update and the end).
inline size_t step_marks(int64_t micro_batches) {
  return static_cast<size_t>(3 * micro_batches + 3);
}

/// A step's phase times from its marks' offsets (seconds after mark 0):
/// data, forward and backward summed over the micro-batches; the exchange
/// is empty when nothing was exchanged (its wait counts as the update's).
StepTimes step_times(const std::vector<double>& offsets, int64_t micro_batches, bool exchanges);

}  // namespace dlscale::train
