// ResNet-18/34/50/101/152 as in torchvision (v1.5: the stride of a bottleneck
// block is on its 3×3 convolution), with its initialization.
#include "libtorch/models/resnet.h"

#include <fmt/format.h>

#include "libtorch/models/layers.h"
#include "libtorch/models/zoo.h"

namespace dlscale::models {
namespace {

using torch::nn::BatchNorm2d;

/// 1×1 convolution + batch norm on the shortcut when shape changes.
torch::nn::Sequential make_downsample(int64_t in, int64_t out, int64_t stride) {
  return torch::nn::Sequential(Conv(conv_options(in, out, 1, stride, 0, false)), BatchNorm2d(out));
}

class BasicBlockImpl : public torch::nn::Module {
 public:
  static constexpr int64_t kExpansion = 1;
  BasicBlockImpl(int64_t in, int64_t planes, int64_t stride) {
    conv1_ = register_module("conv1", Conv(conv_options(in, planes, 3, stride, 1, false)));
    bn1_ = register_module("bn1", BatchNorm2d(planes));
    conv2_ = register_module("conv2", Conv(conv_options(planes, planes, 3, 1, 1, false)));
    bn2_ = register_module("bn2", BatchNorm2d(planes));
    if (stride != 1 || in != planes) {
      downsample_ = register_module("downsample", make_downsample(in, planes, stride));
    }
  }

  torch::Tensor forward(const torch::Tensor& x) {
    torch::Tensor out = bn1_(conv1_(x)).relu_();
    out = bn2_(conv2_(out));
    out += downsample_ ? downsample_->forward(x) : x;
    return torch::relu_(out);
  }

 private:
  Conv conv1_{nullptr}, conv2_{nullptr};
  BatchNorm2d bn1_{nullptr}, bn2_{nullptr};
  torch::nn::Sequential downsample_{nullptr};
};
TORCH_MODULE(BasicBlock);

class BottleneckImpl : public torch::nn::Module {
 public:
  static constexpr int64_t kExpansion = 4;
  BottleneckImpl(int64_t in, int64_t planes, int64_t stride) {
    const int64_t out = planes * kExpansion;
    conv1_ = register_module("conv1", Conv(conv_options(in, planes, 1, 1, 0, false)));
    bn1_ = register_module("bn1", BatchNorm2d(planes));
    conv2_ = register_module("conv2", Conv(conv_options(planes, planes, 3, stride, 1, false)));
    bn2_ = register_module("bn2", BatchNorm2d(planes));
    conv3_ = register_module("conv3", Conv(conv_options(planes, out, 1, 1, 0, false)));
    bn3_ = register_module("bn3", BatchNorm2d(out));
    if (stride != 1 || in != out) {
      downsample_ = register_module("downsample", make_downsample(in, out, stride));
    }
  }

  torch::Tensor forward(const torch::Tensor& x) {
    torch::Tensor out = bn1_(conv1_(x)).relu_();
    out = bn2_(conv2_(out)).relu_();
    out = bn3_(conv3_(out));
    out += downsample_ ? downsample_->forward(x) : x;
    return torch::relu_(out);
  }

 private:
  Conv conv1_{nullptr}, conv2_{nullptr}, conv3_{nullptr};
  BatchNorm2d bn1_{nullptr}, bn2_{nullptr}, bn3_{nullptr};
  torch::nn::Sequential downsample_{nullptr};
};
TORCH_MODULE(Bottleneck);

template <typename Block>
class ResNet : public ImageModel {
 public:
  ResNet(const std::vector<int64_t>& blocks, const ModelOptions& o) {
    conv1_ = register_module("conv1", Conv(conv_options(3, 64, 7, 2, 3, false)));
    bn1_ = register_module("bn1", BatchNorm2d(64));
    const int64_t planes[4] = {64, 128, 256, 512};
    for (size_t stage = 0; stage < 4; ++stage) {
      torch::nn::Sequential layer;
      for (int64_t b = 0; b < blocks[stage]; ++b) {
        const int64_t stride = (stage > 0 && b == 0) ? 2 : 1;
        Block block(in_, planes[stage], stride);
        layer->push_back(block);
        declare_unit(block.ptr());
        in_ = planes[stage] * Block::ContainedType::kExpansion;
      }
      layers_.push_back(register_module(fmt::format("layer{}", stage + 1), layer));
    }
    fc_ = register_module("fc", Fc(in_, o.num_classes));
    torch::NoGradGuard no_grad;
    for (auto& m : modules(/*include_self=*/false)) {
      if (auto* conv = m->as<ConvImpl>()) init_kaiming_fan_out(conv->weight);
    }
    init_batchnorm_identity(*this);
  }

  Output forward_image(const torch::Tensor& x) override {
    torch::Tensor h = bn1_(conv1_(x)).relu_();
    h = torch::max_pool2d(h, 3, 2, 1);
    size_t unit = 0;  // each residual block is a unit
    for (auto& layer : layers_) {
      for (auto& block : *layer) h = run_unit(unit++, [&] { return block.forward(h); });
    }
    h = torch::adaptive_avg_pool2d(h, {1, 1}).flatten(1);
    return {fc_(h), {}};
  }

 private:
  int64_t in_ = 64;
  Conv conv1_{nullptr};
  BatchNorm2d bn1_{nullptr};
  std::vector<torch::nn::Sequential> layers_;
  Fc fc_{nullptr};
};

template <typename Block>
ModelSpec resnet_spec(int depth, std::vector<int64_t> blocks) {
  ModelSpec s = image_classifier_spec(
      fmt::format("resnet{}", depth),
      fmt::format("ResNet-{} (torchvision v1.5, {} blocks)", depth,
                  Block::ContainedType::kExpansion == 1 ? "basic" : "bottleneck"));
  s.default_image_size = 224;
  s.min_image_size = 1;  // every stride-2 stage pads, so even 1×1 inputs stay 1×1
  s.make = [blocks](const ModelOptions& o) { return std::make_shared<ResNet<Block>>(blocks, o); };
  return s;
}

}  // namespace

torch::nn::Sequential resnet_basic_stage(int64_t in, int64_t planes, int64_t blocks,
                                         int64_t stride) {
  torch::nn::Sequential stage;
  for (int64_t b = 0; b < blocks; ++b) {
    stage->push_back(BasicBlock(b == 0 ? in : planes, planes, b == 0 ? stride : 1));
  }
  return stage;
}

std::vector<ModelSpec> resnet_specs() {
  return {
      resnet_spec<BasicBlock>(18, {2, 2, 2, 2}),     resnet_spec<BasicBlock>(34, {3, 4, 6, 3}),
      resnet_spec<Bottleneck>(50, {3, 4, 6, 3}),     resnet_spec<Bottleneck>(101, {3, 4, 23, 3}),
      resnet_spec<Bottleneck>(152, {3, 8, 36, 3}),
  };
}

}  // namespace dlscale::models
