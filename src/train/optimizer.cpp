#include "train/optimizer.h"

namespace dlscale::train {

std::unique_ptr<torch::optim::Optimizer> make_optimizer(OptimizerKind kind,
                                                        std::vector<torch::Tensor> params,
                                                        const TrainOptions& o) {
  using torch::optim::SGDOptions;
  switch (kind) {
    case OptimizerKind::kSgd:
      return std::make_unique<torch::optim::SGD>(params, SGDOptions(o.lr).weight_decay(o.weight_decay));
    case OptimizerKind::kMomentum:
      return std::make_unique<torch::optim::SGD>(
          params, SGDOptions(o.lr).momentum(o.momentum).weight_decay(o.weight_decay));
    case OptimizerKind::kNesterov:
      return std::make_unique<torch::optim::SGD>(
          params,
          SGDOptions(o.lr).momentum(o.momentum).nesterov(true).weight_decay(o.weight_decay));
    case OptimizerKind::kAdam:
      return std::make_unique<torch::optim::Adam>(
          params, torch::optim::AdamOptions(o.lr).weight_decay(o.weight_decay));
  }
  return nullptr;
}

dp::OptimizerFactory optimizer_factory(const ResolvedTrainOptions& config) {
  return [kind = config.optimizer, options = config.options](std::vector<torch::Tensor> params) {
    return make_optimizer(kind, std::move(params), options);
  };
}

}  // namespace dlscale::train
