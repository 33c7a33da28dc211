#pragma once
// Building blocks shared by the zoo. Conv and Fc are LibTorch's Conv2d and
// Linear that also remember the multiply-accumulates of their last forward
// pass, so FLOPs are computed by walking the layers after a probe forward.
#include <torch/torch.h>

#include <cstdint>

namespace dlscale::models {

/// A layer that knows the multiply-accumulates per sample of its last forward.
class MacCounter {
 public:
  virtual ~MacCounter() = default;
  /// MACs per sample of the most recent forward; 0 if it did not run since clear.
  virtual int64_t last_macs_per_sample() const = 0;
  virtual void clear_macs() = 0;
};

class ConvImpl : public torch::nn::Conv2dImpl, public MacCounter {
 public:
  using torch::nn::Conv2dImpl::Conv2dImpl;
  torch::Tensor forward(const torch::Tensor& x);
  int64_t last_macs_per_sample() const override;
  void clear_macs() override { out_positions_ = 0; }

 private:
  int64_t out_positions_ = 0;  // output height × width of the last forward
};
TORCH_MODULE(Conv);

class FcImpl : public torch::nn::LinearImpl, public MacCounter {
 public:
  using torch::nn::LinearImpl::LinearImpl;
  torch::Tensor forward(const torch::Tensor& x);
  int64_t last_macs_per_sample() const override;
  void clear_macs() override { rows_per_sample_ = 0; }

 private:
  int64_t rows_per_sample_ = 0;  // input vectors per sample in the last forward
};
TORCH_MODULE(Fc);

/// Conv (no bias) + BatchNorm + ReLU, torchvision's "BasicConv2d".
class ConvBnReluImpl : public torch::nn::Module {
 public:
  ConvBnReluImpl(torch::nn::Conv2dOptions options, double bn_eps);
  torch::Tensor forward(const torch::Tensor& x);
  Conv conv{nullptr};
  torch::nn::BatchNorm2d bn{nullptr};
};
TORCH_MODULE(ConvBnRelu);

/// Shorthand for Conv2dOptions(in, out, kernel) with stride and padding.
torch::nn::Conv2dOptions conv_options(int64_t in, int64_t out, torch::ExpandingArray<2> kernel,
                                      torch::ExpandingArray<2> stride = 1,
                                      torch::ExpandingArray<2> padding = 0, bool bias = true);

/// Normal(0, std) clamped to [lo, hi]. torchvision uses trunc_normal_ with
/// absolute bounds ±2 and std ≤ 0.1, where truncation almost never triggers;
/// LibTorch 1.13's C++ API has no trunc_normal_.
void init_trunc_normal(torch::Tensor& w, double std, double lo = -2.0, double hi = 2.0);

/// Kaiming-normal (fan_out, ReLU) for convolutions, the ResNet/VGG recipe.
void init_kaiming_fan_out(torch::Tensor& w);

/// Sets every BatchNorm in `module` to weight 1, bias 0.
void init_batchnorm_identity(torch::nn::Module& module);

/// Dropout with probability `p` while `training`, else `x` itself.
torch::Tensor drop(const torch::Tensor& x, double p, bool training);

}  // namespace dlscale::models
