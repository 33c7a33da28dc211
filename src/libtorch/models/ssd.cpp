// SSD300 as MLPerf v0.5's single-stage detector builds it: torchvision's
// ResNet-34 up to layer3, whose first block runs at stride 1 so that the
// first feature map stays 38×38; five extra blocks (1×1 then 3×3
// convolution, each with ReLU) down to 19, 10, 5, 3 and 1; on each of the
// six maps a 3×3 head of 4 offsets and one of `classes` scores per default
// box (4, 6, 6, 6, 4, 4 a position: 8,732 boxes). Initialization is the
// reference's for the extra blocks and heads (Xavier-uniform weights,
// PyTorch's default biases) and torchvision's for the backbone, untrained:
// the reference starts from ImageNet weights, which a benchmark of the
// training step does not need.
#include <fmt/format.h>

#include "libtorch/models/detection.h"
#include "libtorch/models/layers.h"
#include "libtorch/models/resnet.h"
#include "libtorch/models/zoo.h"

namespace dlscale::models {

namespace {

constexpr int64_t kMapChannels[kSsdMaps] = {256, 512, 512, 256, 256, 256};
/// Each extra block's 1×1 width, and whether its 3×3 has stride 2 and padding 1
/// (the last two: stride 1, no padding, 5 -> 3 -> 1).
constexpr int64_t kExtraWidth[kSsdMaps - 1] = {256, 256, 128, 128, 128};
constexpr bool kExtraHalves[kSsdMaps - 1] = {true, true, true, false, false};

class Ssd300 : public ImageModel {
 public:
  explicit Ssd300(int64_t classes) : classes_(classes) {
    conv1_ = register_module("conv1", Conv(conv_options(3, 64, 7, 2, 3, false)));
    bn1_ = register_module("bn1", torch::nn::BatchNorm2d(64));
    const int64_t stages[3][4] = {
        {64, 64, 3, 1}, {64, 128, 4, 2}, {128, 256, 6, 1}};  // in, planes, blocks, stride
    for (const auto& st : stages) {
      stages_.push_back(register_module(fmt::format("layer{}", stages_.size() + 1),
                                        resnet_basic_stage(st[0], st[1], st[2], st[3])));
      for (const auto& block : stages_.back()->children()) declare_unit(block);
    }
    for (int64_t e = 0; e + 1 < kSsdMaps; ++e) {
      const int64_t stride = kExtraHalves[e] ? 2 : 1;
      extra_.push_back(register_module(
          fmt::format("extra{}", e + 1),
          torch::nn::Sequential(Conv(conv_options(kMapChannels[e], kExtraWidth[e], 1)),
                                torch::nn::ReLU(true),
                                Conv(conv_options(kExtraWidth[e], kMapChannels[e + 1], 3, stride,
                                                  stride == 2 ? 1 : 0)),
                                torch::nn::ReLU(true))));
    }
    for (int64_t m = 0; m < kSsdMaps; ++m) {
      const int64_t boxes = kSsdBoxesPerPosition[m];
      loc_.push_back(register_module(fmt::format("loc{}", m + 1),
                                     Conv(conv_options(kMapChannels[m], boxes * 4, 3, 1, 1))));
      conf_.push_back(
          register_module(fmt::format("conf{}", m + 1),
                          Conv(conv_options(kMapChannels[m], boxes * classes, 3, 1, 1))));
    }
    init_weights();
  }

  /// [batch, 4 + classes, 8732]: each map's offsets and scores, box shape by
  /// box shape, then row by row (detection.h's default-box order).
  Output forward_image(const torch::Tensor& x) override {
    torch::Tensor h = torch::max_pool2d(bn1_(conv1_(x)).relu_(), 3, 2, 1);
    size_t unit = 0;  // each residual block of the backbone is a unit
    for (auto& stage : stages_) {
      for (auto& block : *stage) h = run_unit(unit++, [&] { return block.forward(h); });
    }
    std::vector<torch::Tensor> maps{h};
    for (auto& block : extra_) maps.push_back(block->forward(maps.back()));
    const int64_t n = x.size(0);
    std::vector<torch::Tensor> loc, conf;
    for (int64_t m = 0; m < kSsdMaps; ++m) {
      loc.push_back(loc_[m](maps[m]).reshape({n, 4, -1}));
      conf.push_back(conf_[m](maps[m]).reshape({n, classes_, -1}));
    }
    return {torch::cat({torch::cat(loc, 2), torch::cat(conf, 2)}, 1), {}};
  }

 private:
  void init_weights() {
    torch::NoGradGuard no_grad;
    for (auto& stage : stages_) {
      for (auto& m : stage->modules(/*include_self=*/false)) {
        if (auto* conv = m->as<ConvImpl>()) init_kaiming_fan_out(conv->weight);
      }
    }
    init_kaiming_fan_out(conv1_->weight);
    init_batchnorm_identity(*this);
    std::vector<ConvImpl*> reference;  // the extra blocks and heads
    for (auto& block : extra_) {
      for (auto& m : block->modules(false)) {
        if (auto* conv = m->as<ConvImpl>()) reference.push_back(conv);
      }
    }
    for (auto& c : loc_) reference.push_back(c.get());
    for (auto& c : conf_) reference.push_back(c.get());
    for (auto* conv : reference) torch::nn::init::xavier_uniform_(conv->weight);
  }

  int64_t classes_;
  Conv conv1_{nullptr};
  torch::nn::BatchNorm2d bn1_{nullptr};
  std::vector<torch::nn::Sequential> stages_, extra_;
  std::vector<Conv> loc_, conf_;
};

}  // namespace

ModelSpec ssd300_spec() {
  ModelSpec s;
  s.name = "ssd300";
  s.description =
      "SSD300 (MLPerf v0.5): ResNet-34 backbone to layer3 at stride 1, 6 feature maps, 8,732 "
      "default boxes, "
      "multibox loss";
  s.task = detection();
  s.family = "detection";
  s.takes = {"--classes"};
  s.channels = 3;
  s.default_image_size = kSsdImageSize;
  s.min_image_size = kSsdImageSize;
  s.default_classes = 81;  // COCO's 80 and the background
  s.min_classes = 2;
  s.make = [](const ModelOptions& o) { return std::make_shared<Ssd300>(o.num_classes); };
  return s;
}

}  // namespace dlscale::models
