#pragma once
#include <torch/torch.h>

#include <memory>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "libtorch/dp/gradient_sync.h"
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

/// The key of `p`'s entry in an optimizer's state map: LibTorch 1.x keys
/// by the printed TensorImpl address, 2.x by the address itself.
template <typename Map>
typename Map::key_type optimizer_state_key(const Map& /*state*/, const torch::Tensor& p) {
  if constexpr (std::is_same_v<typename Map::key_type, std::string>) {
    std::ostringstream key;  // as c10::guts::to_string printed it (gone from LibTorch 2.x)
    key << p.unsafeGetTensorImpl();
    return key.str();
  } else {
    return static_cast<typename Map::key_type>(p.unsafeGetTensorImpl());
  }
}

/// Adam's preconditioner squared, parameter by parameter: P^2 with
/// P = 1 / (sqrt(v / (1 - beta2^t)) + eps), the factor each gradient
/// element is scaled by in the update (its learning rate and first-moment
/// correction aside), undefined for a tensor it does not train. Empty
/// unless `optimizer` is Adam and holds state for every tensor it trains
/// (it has stepped them): the noise probe's weights
/// (libtorch/train/noise_scale.h).
std::vector<torch::Tensor> adam_preconditioner_squares(const torch::optim::Optimizer& optimizer,
                                                       const std::vector<torch::Tensor>& params);

/// Sets every group's learning rate (the schedule's value for the step).
void set_learning_rate(torch::optim::Optimizer& optimizer, double lr);

/// make_optimizer() for `config`, as a parameter-server shard takes it.
dp::OptimizerFactory optimizer_factory(const ResolvedTrainOptions& config);

}  // namespace dlscale::train
