#include "libtorch/models/layers.h"

namespace dlscale::models {

torch::Tensor ConvImpl::forward(const torch::Tensor& x) {
  torch::Tensor y = torch::nn::Conv2dImpl::forward(x);
  out_positions_ = y.size(-2) * y.size(-1);
  return y;
}

int64_t ConvImpl::last_macs_per_sample() const {
  // weight is [out, in / groups, kh, kw]: one MAC per weight per output position.
  return weight.numel() * out_positions_;
}

torch::Tensor FcImpl::forward(const torch::Tensor& x) {
  const int64_t batch = x.dim() > 1 ? x.size(0) : 1;
  rows_per_sample_ = batch > 0 ? x.numel() / options.in_features() / batch : 0;
  return torch::nn::LinearImpl::forward(x);
}

int64_t FcImpl::last_macs_per_sample() const { return weight.numel() * rows_per_sample_; }

ConvBnReluImpl::ConvBnReluImpl(torch::nn::Conv2dOptions options, double bn_eps) {
  const int64_t out = options.out_channels();
  conv = register_module("conv", Conv(options.bias(false)));
  bn = register_module("bn", torch::nn::BatchNorm2d(torch::nn::BatchNorm2dOptions(out).eps(bn_eps)));
}

torch::Tensor ConvBnReluImpl::forward(const torch::Tensor& x) {
  return bn(conv(x)).relu_();
}

torch::nn::Conv2dOptions conv_options(int64_t in, int64_t out, torch::ExpandingArray<2> kernel,
                                      torch::ExpandingArray<2> stride,
                                      torch::ExpandingArray<2> padding, bool bias) {
  return torch::nn::Conv2dOptions(in, out, kernel).stride(stride).padding(padding).bias(bias);
}

void init_trunc_normal(torch::Tensor& w, double std, double lo, double hi) {
  torch::NoGradGuard no_grad;
  w.normal_(0.0, std).clamp_(lo, hi);
}

void init_kaiming_fan_out(torch::Tensor& w) {
  torch::nn::init::kaiming_normal_(w, 0.0, torch::kFanOut, torch::kReLU);
}

void init_batchnorm_identity(torch::nn::Module& module) {
  torch::NoGradGuard no_grad;
  for (auto& m : module.modules(/*include_self=*/false)) {
    if (auto* bn = m->as<torch::nn::BatchNorm2dImpl>()) {
      bn->weight.fill_(1.0);
      bn->bias.zero_();
    }
  }
}

torch::Tensor drop(const torch::Tensor& x, double p, bool training) {
  namespace F = torch::nn::functional;
  return p > 0 && training ? F::dropout(x, F::DropoutFuncOptions().p(p).training(true)) : x;
}

}  // namespace dlscale::models
