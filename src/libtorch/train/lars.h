#pragma once
// LARS, layer-wise adaptive rate scaling (You, Gitman and Ginsburg, 2017,
// "Large Batch Training of Convolutional Networks"), as MLPerf's ResNet-50
// reference applies it: for every parameter tensor w with gradient g,
//   trust = η·‖w‖ / (‖g‖ + λ·‖w‖)   (1 when ‖w‖ or ‖g‖ is 0)
//   v ← m·v + lr·trust·(g + λ·w)
//   w ← w − v
// A group with adapt = false (biases and norm weights by default) takes
// v ← m·v + lr·g with neither trust ratio nor weight decay.
#include <torch/torch.h>

#include <functional>
#include <optional>
#include <vector>

namespace dlscale::train {

struct LarsOptions : public torch::optim::OptimizerCloneableOptions<LarsOptions> {
  explicit LarsOptions(double lr = 0.1) : lr_(lr) {}
  TORCH_ARG(double, lr);
  TORCH_ARG(double, momentum) = 0.9;
  TORCH_ARG(double, weight_decay) = 0;
  TORCH_ARG(double, eta) = 0.001;  ///< trust coefficient
  TORCH_ARG(bool, adapt) = true;   ///< apply the trust ratio and weight decay to this group

 public:
  double get_lr() const override { return lr(); }
  void set_lr(const double lr) override { this->lr(lr); }
};

class Lars : public torch::optim::Optimizer {
 public:
  Lars(std::vector<torch::optim::OptimizerParamGroup> groups, LarsOptions defaults);
  torch::Tensor step(LossClosure closure = nullptr) override;
  /// The parameters are segments of tensors spread over workers (--strategy
  /// zero): `tensor_of[group][param]` is each one's tensor (of `tensors`);
  /// each step sums the segments' squared norms per tensor over the
  /// workers with `sum_over_workers` (one collective per step) and takes
  /// the trust ratio from those.
  void shard(std::vector<std::vector<int64_t>> tensor_of, int64_t tensors,
             std::function<void(torch::Tensor&)> sum_over_workers);
  /// Bytes of the velocity tensors kept so far.
  int64_t state_bytes() const;
  /// Momentum buffers, by group then parameter (for checkpoints).
  void save(torch::serialize::OutputArchive& archive) const override;
  void load(torch::serialize::InputArchive& archive) override;

 private:
  std::vector<std::vector<torch::Tensor>> velocity_;  ///< [group][param], undefined until first used
  struct Sharding {
    std::vector<std::vector<int64_t>> tensor_of;
    int64_t tensors = 0;
    std::function<void(torch::Tensor&)> sum_over_workers;
  };
  std::optional<Sharding> sharding_;
  /// [2, tensors]: each tensor's ‖w‖ and ‖g‖ over all workers' segments.
  torch::Tensor whole_tensor_norms();
};

}  // namespace dlscale::train
