#pragma once
// SGD, with momentum, Nesterov momentum and weight decay, updating all of a
// group's parameters with one multi-tensor (`_foreach_*`) operation per
// formula step instead of a loop over tensors: on a GPU that is a few
// kernel launches per step instead of four per parameter (161 tensors in
// ResNet-50), as PyTorch's `SGD(foreach=True)` does. The arithmetic is
// LibTorch's `torch::optim::SGD` operation for operation (bit-for-bit on
// CPU; tested), and its state and checkpoints are SGD's own:
//   d = g + λ·w;  b ← d (first step) or m·b + (1 − dampening)·d;
//   d = d + m·b (Nesterov) or b;  w ← w − lr·d
#include <torch/torch.h>

#include <vector>

namespace dlscale::train {

class MultiTensorSgd : public torch::optim::SGD {
 public:
  using torch::optim::SGD::SGD;
  torch::Tensor step(LossClosure closure = nullptr) override;

 private:
  /// The momentum buffers of `params` after this step's update with `d`
  /// (new buffers are copies of `d`, as SGD starts them).
  std::vector<torch::Tensor> update_momentum(const std::vector<torch::Tensor>& params,
                                             const std::vector<torch::Tensor>& d,
                                             const torch::optim::SGDOptions& o);
};

}  // namespace dlscale::train
