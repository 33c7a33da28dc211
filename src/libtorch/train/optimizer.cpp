#include "libtorch/train/optimizer.h"

#include "core/error.h"
#include "libtorch/train/lars.h"
#include "libtorch/train/multi_tensor_sgd.h"

namespace dlscale::train {

namespace {

using torch::optim::OptimizerParamGroup;

/// The optimizer's options for one group; `full` = weight decay (and LARS's
/// trust ratio) apply to it.
std::unique_ptr<torch::optim::OptimizerOptions> group_options(const OptimizerOptions& o,
                                                              const RecipeOptions& recipe, bool full) {
  using torch::optim::SGDOptions;
  const double wd = full ? o.weight_decay : 0.0;
  switch (o.kind) {
    case OptimizerKind::kSgd:
      return std::make_unique<SGDOptions>(SGDOptions(o.lr).weight_decay(wd));
    case OptimizerKind::kMomentum:
      return std::make_unique<SGDOptions>(SGDOptions(o.lr).momentum(o.momentum).weight_decay(wd));
    case OptimizerKind::kNesterov:
      return std::make_unique<SGDOptions>(
          SGDOptions(o.lr).momentum(o.momentum).nesterov(true).weight_decay(wd));
    case OptimizerKind::kAdam:
      return std::make_unique<torch::optim::AdamOptions>(
          torch::optim::AdamOptions(o.lr).weight_decay(wd));
    case OptimizerKind::kLars:
      return std::make_unique<LarsOptions>(LarsOptions(o.lr)
                                               .momentum(o.momentum)
                                               .weight_decay(wd)
                                               .eta(recipe.lars_eta)
                                               .adapt(full));
  }
  return nullptr;
}

}  // namespace

bool excludes_bias_norm(OptimizerKind kind, const RecipeOptions& recipe) {
  if (recipe.wd_exclude == DecayExclusion::kAuto) return kind == OptimizerKind::kLars;
  return recipe.wd_exclude == DecayExclusion::kBiasNorm;
}

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const OptimizerOptions& o,
                                                        std::vector<torch::Tensor> params,
                                                        const RecipeOptions& recipe,
                                                        const dp::TensorSegments* segments) {
  // One tensor at a time keeps each parameter in cache on a CPU (resnet18's
  // optimizer phase: 15.8 against 19.3 ms a step for the multi-tensor form);
  // on a GPU the multi-tensor form saves kernel launches.
  const bool multi_tensor = !params.empty() && params.front().is_cuda();
  std::vector<OptimizerParamGroup> groups;
  std::vector<std::vector<int64_t>> tensor_of;  // per group, per parameter: its model tensor
  if (excludes_bias_norm(o.kind, recipe)) {
    // Biases and batch-norm scales/shifts are the tensors of at most one
    // dimension (a segment keeps its tensor's: [1, n] for a weight).
    std::vector<torch::Tensor> full, light;
    tensor_of.resize(2);
    for (size_t i = 0; i < params.size(); ++i) {
      const bool is_light = params[i].dim() <= 1;
      (is_light ? light : full).push_back(params[i]);
      tensor_of[is_light ? 1 : 0].push_back(segments != nullptr ? segments->tensor_of[i] : -1);
    }
    groups.emplace_back(std::move(full), group_options(o, recipe, true));
    groups.emplace_back(std::move(light), group_options(o, recipe, false));
  } else {
    tensor_of.push_back(segments != nullptr ? segments->tensor_of : std::vector<int64_t>());
    groups.emplace_back(std::move(params), group_options(o, recipe, true));
  }
  switch (o.kind) {
    case OptimizerKind::kAdam:
      return std::make_unique<torch::optim::Adam>(std::move(groups),
                                                  torch::optim::AdamOptions(o.lr));
    case OptimizerKind::kLars: {
      auto lars = std::make_unique<Lars>(std::move(groups), LarsOptions(o.lr));
      if (segments != nullptr) lars->shard(std::move(tensor_of), segments->tensors, segments->sum_over_workers);
      return lars;
    }
    default:
      if (multi_tensor) {
        return std::make_unique<MultiTensorSgd>(std::move(groups), torch::optim::SGDOptions(o.lr));
      }
      return std::make_unique<torch::optim::SGD>(std::move(groups), torch::optim::SGDOptions(o.lr));
  }
}

int64_t optimizer_state_bytes(const torch::optim::Optimizer& optimizer) {
  auto bytes = [](const torch::Tensor& t) {
    return t.defined() ? t.numel() * static_cast<int64_t>(t.element_size()) : int64_t{0};
  };
  if (const auto* lars = dynamic_cast<const Lars*>(&optimizer)) return lars->state_bytes();
  int64_t total = 0;
  for (const auto& entry : optimizer.state()) {
    // SGD's (momentum, Nesterov; the multi-tensor SGD keeps the same state)
    // and Adam's: the state types of dlscale's other optimizers.
    const torch::optim::OptimizerParamState* state = entry.second.get();
    if (const auto* sgd = dynamic_cast<const torch::optim::SGDParamState*>(state)) {
      total += bytes(sgd->momentum_buffer());
    } else if (const auto* adam = dynamic_cast<const torch::optim::AdamParamState*>(state)) {
      total += bytes(adam->exp_avg()) + bytes(adam->exp_avg_sq()) + bytes(adam->max_exp_avg_sq());
    } else {
      throw InternalError("optimizer_state_bytes: an optimizer state of an unknown type");
    }
  }
  return total;
}

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
}

dp::OptimizerFactory optimizer_factory(const ResolvedTrainOptions& config) {
  return [optimizer = config.options.optimizer, recipe = config.options.recipe](
             std::vector<torch::Tensor> params, const dp::TensorSegments* segments) {
    return make_optimizer(optimizer, std::move(params), recipe, segments);
  };
}

}  // namespace dlscale::train
