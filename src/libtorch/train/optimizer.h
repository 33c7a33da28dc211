#pragma once
#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "libtorch/dp/gradient_sync.h"
#include "libtorch/dp/optimizer_state.h"
#include "train/train_options.h"

namespace dlscale::train {

/// The LibTorch optimizer `optimizer.kind` over `params`: plain SGD, SGD
/// with (Nesterov) momentum, Adam or LARS (libtorch/train/lars.h); with learning rate
/// and weight decay. When the recipe excludes biases and norm weights, those
/// (every tensor of at most one dimension) form a second group without
/// weight decay (and, for LARS, without the trust ratio).
/// With `segments` (parameters that are segments of the model's tensors,
/// --strategy zero), LARS takes each tensor's norms summed over its segments
/// on every worker.
std::unique_ptr<torch::optim::Optimizer> make_optimizer(const OptimizerOptions& optimizer,
                                                        std::vector<torch::Tensor> params,
                                                        const RecipeOptions& recipe,
                                                        const dp::TensorSegments* segments = nullptr);

/// Whether --wd-exclude (auto: for LARS only) puts 1-D tensors in their own group.
bool excludes_bias_norm(OptimizerKind kind, const RecipeOptions& recipe);

/// Bytes of the state tensors `optimizer` keeps (momentum buffers, Adam's
/// moments); 0 before its first step.
int64_t optimizer_state_bytes(const torch::optim::Optimizer& optimizer);

/// Reading an optimizer's state (libtorch/dp/optimizer_state.h).
using dp::adam_preconditioner_squares;
using dp::optimizer_state_key;

/// Sets every group's learning rate (the schedule's value for the step).
void set_learning_rate(torch::optim::Optimizer& optimizer, double lr);

/// make_optimizer() for `config`, as a parameter-server shard takes it.
dp::OptimizerFactory optimizer_factory(const ResolvedTrainOptions& config);

}  // namespace dlscale::train
