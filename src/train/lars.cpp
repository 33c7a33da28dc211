#include "train/lars.h"

#include <fmt/format.h>

#include "train/closure_loss.h"

namespace dlscale::train {

Lars::Lars(std::vector<torch::optim::OptimizerParamGroup> groups, LarsOptions defaults)
    : Optimizer(std::move(groups), std::make_unique<LarsOptions>(defaults)) {
  for (const auto& group : param_groups()) velocity_.emplace_back(group.params().size());
}

namespace {

/// lr·trust of every (w, g) pair, trust = η‖w‖ / (‖g‖ + λ‖w‖), or 1 where a
/// norm is 0: the norms of all tensors at once (multi-tensor), the ratios in
/// a few element-wise operations, read back in one copy (a GPU waits once
/// per group instead of twice per tensor).
std::vector<double> trust_rates(const std::vector<torch::Tensor>& w, const std::vector<torch::Tensor>& g,
                                const LarsOptions& o) {
  const torch::Tensor w_norm = torch::stack(at::_foreach_norm(w));
  const torch::Tensor g_norm = torch::stack(at::_foreach_norm(g));
  const torch::Tensor trust = torch::where(w_norm.gt(0).logical_and(g_norm.gt(0)),
                                           w_norm.mul(o.eta()).div(g_norm.add(w_norm, o.weight_decay())),
                                           torch::ones_like(w_norm));
  const torch::Tensor rates = trust.mul(o.lr()).to(torch::kCPU, torch::kDouble).contiguous();
  return {rates.data_ptr<double>(), rates.data_ptr<double>() + rates.numel()};
}

}  // namespace

torch::Tensor Lars::step(LossClosure closure) {
  const torch::Tensor loss = closure_loss(closure);
  torch::NoGradGuard no_grad;
  for (size_t gi = 0; gi < param_groups().size(); ++gi) {
    auto& group = param_groups()[gi];
    const auto& o = static_cast<const LarsOptions&>(group.options());
    std::vector<size_t> with_grad;  // indices of the tensors with a gradient
    std::vector<torch::Tensor> ws, gs;
    for (size_t pi = 0; pi < group.params().size(); ++pi) {
      if (!group.params()[pi].grad().defined()) continue;
      with_grad.push_back(pi);
      ws.push_back(group.params()[pi]);
      gs.push_back(group.params()[pi].grad());
    }
    if (with_grad.empty()) continue;
    const std::vector<double> rates = o.adapt() ? trust_rates(ws, gs, o) : std::vector<double>();
    for (size_t i = 0; i < with_grad.size(); ++i) {
      // Excluded tensors (adapt off): plain momentum, no decay, no trust ratio.
      const torch::Tensor update =
          o.adapt() && o.weight_decay() != 0 ? gs[i].add(ws[i], o.weight_decay()) : gs[i];
      const double rate = o.adapt() ? rates[i] : o.lr();
      torch::Tensor& v = velocity_[gi][with_grad[i]];
      if (!v.defined()) {
        v = update.mul(rate);
      } else {
        v.mul_(o.momentum()).add_(update, rate);
      }
      ws[i].sub_(v);
    }
  }
  return loss;
}

int64_t Lars::state_bytes() const {
  int64_t total = 0;
  for (const auto& group : velocity_) {
    for (const auto& v : group) {
      if (v.defined()) total += v.numel() * static_cast<int64_t>(v.element_size());
    }
  }
  return total;
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
