#include "libtorch/train/accumulate.h"

#include "core/error.h"

namespace dlscale::train {
namespace {

/// Forward: a float32 zero that does not read `param`. Backward: `taken`
/// for `param` (the output's own gradient is 1: the term is added unscaled).
struct InjectGradient : public torch::autograd::Function<InjectGradient> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor param,
                               torch::Tensor taken) {
    ctx->saved_data["taken"] = taken;
    return torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat32).device(taken.device()));
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list /*grad*/) {
    return {ctx->saved_data["taken"].toTensor(), torch::Tensor()};
  }
};

}  // namespace

std::vector<torch::Tensor> take_gradients(const std::vector<torch::Tensor>& params) {
  std::vector<torch::Tensor> taken;
  taken.reserve(params.size());
  for (const auto& p : params) {
    taken.push_back(p.grad());
    p.mutable_grad() = torch::Tensor();
  }
  return taken;
}

torch::Tensor with_gradients(const torch::Tensor& loss, const std::vector<torch::Tensor>& params,
                             const std::vector<torch::Tensor>& taken) {
  DLSCALE_ASSERT(params.size() == taken.size());
  torch::Tensor total = loss;
  for (size_t i = 0; i < params.size(); ++i) {
    if (taken[i].defined()) total = total + InjectGradient::apply(params[i], taken[i]);
  }
  return total;
}

StepTimes step_times(const std::vector<double>& o, int64_t micro_batches, bool exchanges) {
  const auto k = static_cast<size_t>(micro_batches);
  DLSCALE_ASSERT(o.size() == step_marks(micro_batches));
  StepTimes t;
  for (size_t m = 0; m < k; ++m) {
    t.data += o[3 * m + 1] - o[3 * m];
    t.forward += o[3 * m + 2] - o[3 * m + 1];
    t.backward += o[3 * m + 3] - o[3 * m + 2];  // the last one ends at the exchange's mark
  }
  const double update_start = exchanges ? o[3 * k + 1] : o[3 * k];
  t.comm = update_start - o[3 * k];
  t.optimizer = o[3 * k + 2] - update_start;
  t.total = o[3 * k + 2];
  return t;
}

}  // namespace dlscale::train
