// Mask R-CNN's network (maskrcnn_net.h): torchvision's layers, shapes and
// initialization, with the reference's frozen batch norm, stem and first
// stage.
#include "libtorch/models/maskrcnn_net.h"

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>

#include <cmath>
#include <string>

namespace dlscale::models {
namespace {

/// torchvision's ResNet-50 bottleneck (v1.5) on frozen batch norm; its
/// convolutions frozen too in the first stage.
class FrozenBnBottleneckImpl : public torch::nn::Module {
 public:
  static constexpr int64_t kExpansion = 4;
  FrozenBnBottleneckImpl(int64_t in, int64_t planes, int64_t stride, bool frozen) {
    const int64_t out = planes * kExpansion;
    conv1_ = register_module("conv1", BackboneConv(in, planes, 1, 1, 0, frozen));
    bn1_ = register_module("bn1", FrozenBatchNorm(planes));
    conv2_ = register_module("conv2", BackboneConv(planes, planes, 3, stride, 1, frozen));
    bn2_ = register_module("bn2", FrozenBatchNorm(planes));
    conv3_ = register_module("conv3", BackboneConv(planes, out, 1, 1, 0, frozen));
    bn3_ = register_module("bn3", FrozenBatchNorm(out));
    if (stride != 1 || in != out) {
      down_conv_ = register_module("downsample_conv", BackboneConv(in, out, 1, stride, 0, frozen));
      down_bn_ = register_module("downsample_bn", FrozenBatchNorm(out));
    }
  }

  torch::Tensor forward(const torch::Tensor& x) {
    torch::Tensor out = bn1_(conv1_(x)).relu_();
    out = bn2_(conv2_(out)).relu_();
    out = bn3_(conv3_(out));
    out += down_conv_ ? down_bn_(down_conv_(x)) : x;
    return torch::relu_(out);
  }

 private:
  BackboneConv conv1_{nullptr}, conv2_{nullptr}, conv3_{nullptr}, down_conv_{nullptr};
  FrozenBatchNorm bn1_{nullptr}, bn2_{nullptr}, bn3_{nullptr}, down_bn_{nullptr};
};
TORCH_MODULE(FrozenBnBottleneck);

void zero_bias(torch::nn::Conv2dImpl& conv) { torch::nn::init::zeros_(conv.bias); }

}  // namespace

FrozenBatchNormImpl::FrozenBatchNormImpl(int64_t channels) {
  weight_ = register_buffer("weight", torch::ones({channels}));
  bias_ = register_buffer("bias", torch::zeros({channels}));
  running_mean_ = register_buffer("running_mean", torch::zeros({channels}));
  running_var_ = register_buffer("running_var", torch::ones({channels}));
}

torch::Tensor FrozenBatchNormImpl::forward(const torch::Tensor& x) {
  if (calibrating_) {
    torch::NoGradGuard no_grad;
    const auto [var, mean] = torch::var_mean(x.to(torch::kFloat32), {0, 2, 3}, /*unbiased=*/false);
    running_mean_.copy_(mean);
    running_var_.copy_(var);
  }
  const torch::Tensor scale = weight_ * (running_var_ + 1e-5).rsqrt();
  const torch::Tensor shift = bias_ - running_mean_ * scale;
  return x * scale.view({1, -1, 1, 1}) + shift.view({1, -1, 1, 1});
}

BackboneConvImpl::BackboneConvImpl(int64_t in, int64_t out, int64_t kernel, int64_t stride,
                                   int64_t padding, bool frozen)
    : stride_(stride), padding_(padding) {
  torch::Tensor w = torch::empty({out, in, kernel, kernel});
  init_kaiming_fan_out(w);
  weight_ = frozen ? register_buffer("weight", w) : register_parameter("weight", w);
}

torch::Tensor BackboneConvImpl::forward(const torch::Tensor& x) {
  torch::Tensor y = torch::conv2d(x, weight_, {}, stride_, padding_);
  out_positions_ = y.size(2) * y.size(3);
  return y;
}

torch::Tensor DeconvImpl::forward(const torch::Tensor& x) {
  in_positions_ = x.size(-2) * x.size(-1);
  return torch::nn::ConvTranspose2dImpl::forward(x);
}

int64_t DeconvImpl::last_macs_per_sample() const { return in_positions_ * weight.numel(); }

ResnetFpnImpl::ResnetFpnImpl() {
  // The reference trains the last three stages (torchvision's
  // trainable_backbone_layers=3): the stem and the first stage are frozen.
  conv1_ = register_module("conv1", BackboneConv(3, 64, 7, 2, 3, /*frozen=*/true));
  bn1_ = register_module("bn1", FrozenBatchNorm(64));
  const int64_t blocks[4] = {3, 4, 6, 3};
  int64_t in = 64;
  for (int64_t stage = 0; stage < 4; ++stage) {
    torch::nn::Sequential layer;
    const int64_t planes = int64_t{64} << stage;
    for (int64_t b = 0; b < blocks[stage]; ++b) {
      layer->push_back(FrozenBnBottleneck(in, planes, (stage > 0 && b == 0) ? 2 : 1, stage == 0));
      in = planes * FrozenBnBottleneckImpl::kExpansion;
    }
    stages_.push_back(register_module(fmt::format("layer{}", stage + 1), layer));
    Conv inner(conv_options(in, kFpnChannels, 1));
    Conv out(conv_options(kFpnChannels, kFpnChannels, 3, 1, 1));
    for (Conv* c : {&inner, &out}) {
      torch::nn::init::kaiming_uniform_((*c)->weight, 1);
      zero_bias(**c);
    }
    inner_.push_back(register_module(fmt::format("fpn_inner{}", stage + 1), inner));
    layer_.push_back(register_module(fmt::format("fpn_layer{}", stage + 1), out));
  }
  stand_in_for_pretrained();
}

void ResnetFpnImpl::stand_in_for_pretrained() {
  constexpr uint64_t kPretrainedSeed = 0x5eed'0f'1a6e'0e7ULL;
  at::Generator gen = at::detail::createCPUGenerator(kPretrainedSeed);
  torch::NoGradGuard no_grad;
  std::vector<FrozenBatchNormImpl*> norms;
  for (auto& m : modules(/*include_self=*/false)) {
    if (auto* bn = m->as<FrozenBatchNormImpl>()) norms.push_back(bn);
    auto* conv = m->as<BackboneConvImpl>();
    if (conv == nullptr) continue;
    torch::Tensor w = conv->weight();
    const double fan_out = static_cast<double>(w.size(0) * w.size(2) * w.size(3));
    w.normal_(0, std::sqrt(2.0 / fan_out), gen);
  }
  for (auto* bn : norms) bn->set_calibrating(true);
  forward(torch::randn({2, 3, 128, 128}, gen, torch::kFloat32));
  for (auto* bn : norms) bn->set_calibrating(false);
}

std::vector<torch::Tensor> ResnetFpnImpl::forward(const torch::Tensor& images) {
  torch::Tensor h = torch::max_pool2d(bn1_(conv1_(images)).relu_(), 3, 2, 1);
  std::vector<torch::Tensor> stages;
  for (auto& stage : stages_) {
    h = stage->forward(h);
    stages.push_back(h);
  }
  // Top-down: each lateral plus the coarser level upsampled (nearest).
  std::vector<torch::Tensor> pyramid(stages.size());
  torch::Tensor top = inner_.back()(stages.back());
  pyramid.back() = layer_.back()(top);
  for (size_t i = stages.size() - 1; i-- > 0;) {
    const torch::Tensor lateral = inner_[i](stages[i]);
    top = lateral + torch::nn::functional::interpolate(
                        top, torch::nn::functional::InterpolateFuncOptions()
                                 .size(std::vector<int64_t>{lateral.size(2), lateral.size(3)})
                                 .mode(torch::kNearest));
    pyramid[i] = layer_[i](top);
  }
  pyramid.push_back(torch::max_pool2d(pyramid.back(), 1, 2, 0));  // P6
  return pyramid;
}

RpnHeadImpl::RpnHeadImpl() {
  conv_ = register_module("conv", Conv(conv_options(kFpnChannels, kFpnChannels, 3, 1, 1)));
  objectness_ =
      register_module("objectness", Conv(conv_options(kFpnChannels, kRpnAnchorsPerPosition, 1)));
  codes_ =
      register_module("codes", Conv(conv_options(kFpnChannels, 4 * kRpnAnchorsPerPosition, 1)));
  for (Conv* c : {&conv_, &objectness_, &codes_}) {
    torch::nn::init::normal_((*c)->weight, 0, 0.01);
    zero_bias(**c);
  }
}

std::pair<std::vector<torch::Tensor>, std::vector<torch::Tensor>> RpnHeadImpl::forward(
    const std::vector<torch::Tensor>& maps) {
  std::vector<torch::Tensor> objectness, codes;
  for (const torch::Tensor& m : maps) {
    const torch::Tensor h = conv_(m).relu_();
    objectness.push_back(objectness_(h));
    codes.push_back(codes_(h));
  }
  return {objectness, codes};
}

BoxHeadImpl::BoxHeadImpl(int64_t classes) {
  fc6_ = register_module("fc6", Fc(kFpnChannels * 7 * 7, 1024));
  fc7_ = register_module("fc7", Fc(1024, 1024));
  scores_ = register_module("cls_score", Fc(1024, classes));
  codes_ = register_module("bbox_pred", Fc(1024, 4 * classes));
}

std::pair<torch::Tensor, torch::Tensor> BoxHeadImpl::forward(const torch::Tensor& pooled) {
  const torch::Tensor h = fc7_(fc6_(pooled.flatten(1)).relu_()).relu_();
  return {scores_(h), codes_(h)};
}

MaskHeadImpl::MaskHeadImpl(int64_t classes) {
  for (int i = 0; i < 4; ++i) {
    Conv c(conv_options(kFpnChannels, kFpnChannels, 3, 1, 1));
    init_kaiming_fan_out(c->weight);
    zero_bias(*c);
    convs_.push_back(register_module(fmt::format("mask_fcn{}", i + 1), c));
  }
  deconv_ = register_module(
      "conv5_mask",
      Deconv(torch::nn::ConvTranspose2dOptions(kFpnChannels, kFpnChannels, 2).stride(2)));
  init_kaiming_fan_out(deconv_->weight);
  torch::nn::init::zeros_(deconv_->bias);
  logits_ = register_module("mask_fcn_logits", Conv(conv_options(kFpnChannels, classes, 1)));
  init_kaiming_fan_out(logits_->weight);
  zero_bias(*logits_);
}

torch::Tensor MaskHeadImpl::forward(const torch::Tensor& pooled) {
  torch::Tensor h = pooled;
  for (auto& c : convs_) h = c(h).relu_();
  return logits_(deconv_(h).relu_());
}

MaskRcnnNetImpl::MaskRcnnNetImpl(int64_t classes) {
  backbone = register_module("backbone", ResnetFpn());
  rpn = register_module("rpn", RpnHead());
  box = register_module("box", BoxHead(classes));
  mask = register_module("mask", MaskHead(classes));
}

int64_t frozen_weight_count(const torch::nn::Module& module) {
  int64_t n = 0;
  const auto ends_with = [](const std::string& s, const std::string& end) {
    return s.size() >= end.size() && s.compare(s.size() - end.size(), end.size(), end) == 0;
  };
  for (const auto& b : module.named_buffers()) {
    if (!ends_with(b.key(), "running_mean") && !ends_with(b.key(), "running_var"))
      n += b.value().numel();
  }
  return n;
}

}  // namespace dlscale::models
