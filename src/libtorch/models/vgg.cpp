// VGG-11/16/19 (configurations A, D, E; no batch norm) as in torchvision,
// with its initialization: Kaiming-normal convolutions, N(0, 0.01) FC layers.
#include <fmt/format.h>

#include <algorithm>

#include "libtorch/models/layers.h"
#include "libtorch/models/zoo.h"

namespace dlscale::models {
namespace {

constexpr int64_t kPool = 0;  // marks a 2×2 max-pool in a configuration

class Vgg : public ImageModel {
 public:
  Vgg(const std::vector<int64_t>& config, const ModelOptions& o) {
    using torch::nn::Dropout;
    using torch::nn::ReLU;
    torch::nn::Sequential features;
    int64_t in = 3;
    for (int64_t c : config) {
      if (c == kPool) {
        features->push_back(torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions(2).stride(2)));
      } else {
        features->push_back(Conv(conv_options(in, c, 3, 1, 1)));
        features->push_back(ReLU(torch::nn::ReLUOptions(true)));
        in = c;
      }
    }
    features_ = register_module("features", features);
    classifier_ = register_module(
        "classifier",
        torch::nn::Sequential(Fc(512 * 7 * 7, 4096), ReLU(torch::nn::ReLUOptions(true)), Dropout(dropout_or(o, 0.5)), Fc(4096, 4096), ReLU(torch::nn::ReLUOptions(true)),
                              Dropout(dropout_or(o, 0.5)), Fc(4096, o.num_classes)));
    torch::NoGradGuard no_grad;
    for (auto& m : modules(/*include_self=*/false)) {
      if (auto* conv = m->as<ConvImpl>()) {
        init_kaiming_fan_out(conv->weight);
        conv->bias.zero_();
      } else if (auto* fc = m->as<FcImpl>()) {
        fc->weight.normal_(0.0, 0.01);
        fc->bias.zero_();
      }
    }
  }

  Output forward_image(const torch::Tensor& x) override {
    torch::Tensor h = torch::adaptive_avg_pool2d(features_->forward(x), {7, 7});
    return {classifier_->forward(h.flatten(1)), {}};
  }

 private:
  torch::nn::Sequential features_{nullptr};
  torch::nn::Sequential classifier_{nullptr};
};

ModelSpec vgg_spec(const std::string& name, std::vector<int64_t> config) {
  const auto convs = std::count_if(config.begin(), config.end(), [](int64_t c) { return c != kPool; });
  ModelSpec s = image_classifier_spec(
      name, fmt::format("VGG-{} (torchvision, no batch norm): {} conv + 3 FC", convs + 3, convs));
  s.default_image_size = 224;
  s.min_image_size = 32;  // five 2×2 max-pools
  s.make = [config](const ModelOptions& o) { return std::make_shared<Vgg>(config, o); };
  return s;
}

}  // namespace

std::vector<ModelSpec> vgg_specs() {
  const int64_t M = kPool;
  return {
      vgg_spec("vgg11", {64, M, 128, M, 256, 256, M, 512, 512, M, 512, 512, M}),
      vgg_spec("vgg16", {64, 64, M, 128, 128, M, 256, 256, 256, M, 512, 512, 512, M, 512, 512, 512, M}),
      vgg_spec("vgg19", {64, 64, M, 128, 128, M, 256, 256, 256, 256, M, 512, 512, 512, 512, M, 512,
                         512, 512, 512, M}),
  };
}

}  // namespace dlscale::models
