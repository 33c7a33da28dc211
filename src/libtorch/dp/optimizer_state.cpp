#include "libtorch/dp/optimizer_state.h"

#include <cmath>
#include <unordered_map>

namespace dlscale::dp {

std::vector<torch::Tensor> adam_preconditioner_squares(const torch::optim::Optimizer& optimizer,
                                                       const std::vector<torch::Tensor>& params) {
  if (dynamic_cast<const torch::optim::Adam*>(&optimizer) == nullptr) return {};
  torch::NoGradGuard no_grad;
  const auto& state = optimizer.state();
  std::unordered_map<const void*, torch::Tensor> square_of;  // by TensorImpl
  for (const auto& group : optimizer.param_groups()) {
    const auto& o = static_cast<const torch::optim::AdamOptions&>(group.options());
    for (const auto& p : group.params()) {
      const auto it = state.find(optimizer_state_key(state, p));
      if (it == state.end()) return {};  // not stepped yet
      const auto& s = static_cast<const torch::optim::AdamParamState&>(*it->second);
      const double correction = 1 - std::pow(std::get<1>(o.betas()), static_cast<double>(s.step()));
      const torch::Tensor v = o.amsgrad() ? s.max_exp_avg_sq() : s.exp_avg_sq();
      square_of[p.unsafeGetTensorImpl()] =
          (v / correction).sqrt_().add_(o.eps()).reciprocal_().square_();
    }
  }
  std::vector<torch::Tensor> squares;  // undefined for a tensor the optimizer does not train
  for (const auto& p : params) {
    const auto it = square_of.find(p.unsafeGetTensorImpl());
    squares.push_back(it == square_of.end() ? torch::Tensor() : it->second);
  }
  return squares;
}

}  // namespace dlscale::dp
