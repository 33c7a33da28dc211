#pragma once
// Reading a LibTorch optimizer's state: where a trainer's optimizer keeps a
// tensor's entry, and Adam's preconditioner from its second moments (the
// noise probe's weights, libtorch/train/noise_scale.h; a parameter-server
// shard's, libtorch/dp/ps_shard.h).
#include <torch/torch.h>

#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

namespace dlscale::dp {

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
/// (it has stepped them).
std::vector<torch::Tensor> adam_preconditioner_squares(const torch::optim::Optimizer& optimizer,
                                                       const std::vector<torch::Tensor>& params);

}  // namespace dlscale::dp
