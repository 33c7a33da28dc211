#include "libtorch/train/lars.h"

#include <fmt/format.h>

#include "core/error.h"
#include "libtorch/train/closure_loss.h"

namespace dlscale::train {

Lars::Lars(std::vector<torch::optim::OptimizerParamGroup> groups, LarsOptions defaults)
    : Optimizer(std::move(groups), std::make_unique<LarsOptions>(defaults)) {
  for (const auto& group : param_groups()) velocity_.emplace_back(group.params().size());
}

namespace {

/// lr·trust of every (w, g) pair from their norms, trust = η‖w‖ / (‖g‖ +
/// λ‖w‖), or 1 where a norm is 0: a few element-wise operations, read back
/// in one copy (a GPU waits once per group instead of twice per tensor).
std::vector<double> trust_rates(const torch::Tensor& w_norm, const torch::Tensor& g_norm, const LarsOptions& o) {
  const torch::Tensor trust = torch::where(w_norm.gt(0).logical_and(g_norm.gt(0)),
                                           w_norm.mul(o.eta()).div(g_norm.add(w_norm, o.weight_decay())),
                                           torch::ones_like(w_norm));
  const torch::Tensor rates = trust.mul(o.lr()).to(torch::kCPU, torch::kDouble).contiguous();
  return {rates.data_ptr<double>(), rates.data_ptr<double>() + rates.numel()};
}

}  // namespace

void Lars::shard(std::vector<std::vector<int64_t>> tensor_of, int64_t tensors,
                 std::function<void(torch::Tensor&)> sum_over_workers) {
  DLSCALE_CHECK(tensor_of.size() == param_groups().size(), "LARS: {} groups of segments for {} groups",
                tensor_of.size(), param_groups().size());
  sharding_ = Sharding{std::move(tensor_of), tensors, std::move(sum_over_workers)};
}

torch::Tensor Lars::whole_tensor_norms() {
  // Squared norms of this worker's segments, added up per tensor, then over
  // the workers: one collective per step whatever this worker holds.
  torch::TensorOptions on = torch::TensorOptions().dtype(torch::kFloat32);
  for (const auto& group : param_groups()) {
    if (!group.params().empty()) on = on.device(group.params().front().device());
  }
  torch::Tensor sums = torch::zeros({2, sharding_->tensors}, on);
  for (size_t gi = 0; gi < param_groups().size(); ++gi) {
    const auto& params = param_groups()[gi].params();
    for (size_t pi = 0; pi < params.size(); ++pi) {
      if (!params[pi].grad().defined()) continue;
      const int64_t t = sharding_->tensor_of[gi][pi];
      // Summed in float64 here; only the workers' partial sums add in float32.
      sums[0][t] += params[pi].square().sum(torch::kFloat64);
      sums[1][t] += params[pi].grad().square().sum(torch::kFloat64);
    }
  }
  sharding_->sum_over_workers(sums);
  return sums.sqrt_();
}

torch::Tensor Lars::step(LossClosure closure) {
  const torch::Tensor loss = closure_loss(closure);
  torch::NoGradGuard no_grad;
  const torch::Tensor sharded_norms = sharding_ ? whole_tensor_norms() : torch::Tensor();
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
    std::vector<double> rates;
    if (o.adapt() && sharded_norms.defined()) {
      // Each segment takes its whole tensor's norms.
      std::vector<int64_t> ids;
      for (size_t pi : with_grad) ids.push_back(sharding_->tensor_of[gi][pi]);
      const torch::Tensor index = torch::tensor(ids, torch::kInt64).to(sharded_norms.device());
      rates = trust_rates(sharded_norms[0].index_select(0, index), sharded_norms[1].index_select(0, index), o);
    } else if (o.adapt()) {
      // The norms of all tensors at once (multi-tensor).
      rates = trust_rates(torch::stack(at::_foreach_norm(ws)), torch::stack(at::_foreach_norm(gs)), o);
    }
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
