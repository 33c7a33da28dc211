#include "train/lars.h"

#include <fmt/format.h>

namespace dlscale::train {

Lars::Lars(std::vector<torch::optim::OptimizerParamGroup> groups, LarsOptions defaults)
    : Optimizer(std::move(groups), std::make_unique<LarsOptions>(defaults)) {
  for (const auto& group : param_groups()) velocity_.emplace_back(group.params().size());
}

torch::Tensor Lars::step(LossClosure closure) {
  torch::NoGradGuard no_grad;
  torch::Tensor loss;
  if (closure) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  for (size_t gi = 0; gi < param_groups().size(); ++gi) {
    auto& group = param_groups()[gi];
    const auto& o = static_cast<const LarsOptions&>(group.options());
    for (size_t pi = 0; pi < group.params().size(); ++pi) {
      torch::Tensor& w = group.params()[pi];
      if (!w.grad().defined()) continue;
      torch::Tensor update = w.grad();
      double rate = o.lr();
      if (o.adapt()) {
        const double w_norm = w.norm().item<double>();
        const double g_norm = update.norm().item<double>();
        if (w_norm > 0 && g_norm > 0) rate *= o.eta() * w_norm / (g_norm + o.weight_decay() * w_norm);
        if (o.weight_decay() != 0) update = update.add(w, o.weight_decay());
      }
      torch::Tensor& v = velocity_[gi][pi];
      if (!v.defined()) {
        v = update.mul(rate);
      } else {
        v.mul_(o.momentum()).add_(update, rate);
      }
      w.sub_(v);
    }
  }
  return loss;
}

void Lars::save(torch::serialize::OutputArchive& archive) const {
  for (size_t gi = 0; gi < velocity_.size(); ++gi) {
    for (size_t pi = 0; pi < velocity_[gi].size(); ++pi) {
      if (velocity_[gi][pi].defined()) {
        archive.write(fmt::format("velocity.{}.{}", gi, pi), velocity_[gi][pi]);
      }
    }
  }
}

void Lars::load(torch::serialize::InputArchive& archive) {
  for (size_t gi = 0; gi < velocity_.size(); ++gi) {
    for (size_t pi = 0; pi < velocity_[gi].size(); ++pi) {
      torch::Tensor v;
      if (archive.try_read(fmt::format("velocity.{}.{}", gi, pi), v)) velocity_[gi][pi] = v;
    }
  }
}

}  // namespace dlscale::train
