#include "libtorch/train/multi_tensor_sgd.h"

#include "libtorch/train/closure_loss.h"
#include "libtorch/train/optimizer.h"

namespace dlscale::train {

std::vector<torch::Tensor> MultiTensorSgd::update_momentum(const std::vector<torch::Tensor>& params,
                                                           const std::vector<torch::Tensor>& d,
                                                           const torch::optim::SGDOptions& o) {
  std::vector<torch::Tensor> bufs(params.size()), old_bufs, old_d;
  for (size_t i = 0; i < params.size(); ++i) {
    const auto key = optimizer_state_key(state_, params[i]);
    const auto it = state_.find(key);
    if (it == state_.end()) {
      bufs[i] = torch::clone(d[i]).detach();
      auto state = std::make_unique<torch::optim::SGDParamState>();
      state->momentum_buffer(bufs[i]);
      state_[key] = std::move(state);
    } else {
      bufs[i] = static_cast<torch::optim::SGDParamState&>(*it->second).momentum_buffer();
      old_bufs.push_back(bufs[i]);
      old_d.push_back(d[i]);
    }
  }
  if (!old_bufs.empty()) {
    at::_foreach_mul_(old_bufs, o.momentum());
    at::_foreach_add_(old_bufs, old_d, 1 - o.dampening());
  }
  return bufs;
}

torch::Tensor MultiTensorSgd::step(LossClosure closure) {
  const torch::Tensor loss = closure_loss(closure);
  torch::NoGradGuard no_grad;
  for (auto& group : param_groups()) {
    const auto& o = static_cast<const torch::optim::SGDOptions&>(group.options());
    std::vector<torch::Tensor> params, grads;
    for (const auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      params.push_back(p);
      grads.push_back(p.grad());
    }
    if (params.empty()) continue;
    // Out of place where SGD is: the gradients themselves stay as they were.
    std::vector<torch::Tensor> d =
        o.weight_decay() != 0 ? at::_foreach_add(grads, params, o.weight_decay()) : grads;
    if (o.momentum() != 0) {
      std::vector<torch::Tensor> bufs = update_momentum(params, d, o);
      d = o.nesterov() ? at::_foreach_add(d, bufs, o.momentum()) : std::move(bufs);
    }
    at::_foreach_add_(params, d, -1 * o.lr());
  }
  return loss;
}

}  // namespace dlscale::train
