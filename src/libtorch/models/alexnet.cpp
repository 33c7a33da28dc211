// AlexNet as in torchvision (the one-GPU variant of Krizhevsky 2014), with
// LibTorch's default initialization like torchvision's. ReLUs are in place, as there.
#include "libtorch/models/layers.h"
#include "libtorch/models/zoo.h"

namespace dlscale::models {
namespace {

torch::nn::MaxPool2d max_pool_3s2() {
  return torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions(3).stride(2));
}

class AlexNet : public ImageModel {
 public:
  explicit AlexNet(const ModelOptions& o) {
    using torch::nn::Dropout;
    using torch::nn::ReLU;
    features_ = register_module(
        "features",
        torch::nn::Sequential(Conv(conv_options(3, 64, 11, 4, 2)), ReLU(torch::nn::ReLUOptions(true)), max_pool_3s2(),
                              Conv(conv_options(64, 192, 5, 1, 2)), ReLU(torch::nn::ReLUOptions(true)), max_pool_3s2(),
                              Conv(conv_options(192, 384, 3, 1, 1)), ReLU(torch::nn::ReLUOptions(true)),
                              Conv(conv_options(384, 256, 3, 1, 1)), ReLU(torch::nn::ReLUOptions(true)),
                              Conv(conv_options(256, 256, 3, 1, 1)), ReLU(torch::nn::ReLUOptions(true)), max_pool_3s2()));
    classifier_ = register_module(
        "classifier",
        torch::nn::Sequential(Dropout(dropout_or(o, 0.5)), Fc(256 * 6 * 6, 4096), ReLU(torch::nn::ReLUOptions(true)), Dropout(dropout_or(o, 0.5)),
                              Fc(4096, 4096), ReLU(torch::nn::ReLUOptions(true)), Fc(4096, o.num_classes)));
  }

  Output forward_image(const torch::Tensor& x) override {
    torch::Tensor h = torch::adaptive_avg_pool2d(features_->forward(x), {6, 6});
    return {classifier_->forward(h.flatten(1)), {}};
  }

 private:
  torch::nn::Sequential features_{nullptr};
  torch::nn::Sequential classifier_{nullptr};
};

}  // namespace

ModelSpec alexnet_spec() {
  ModelSpec s = image_classifier_spec("alexnet", "AlexNet (torchvision): 5 conv + 3 FC");
  s.default_image_size = 224;
  // conv1 (11×11/4) and three 3×3/2 max-pools must each leave >= 1 pixel.
  s.min_image_size = 63;
  s.make = [](const ModelOptions& o) { return std::make_shared<AlexNet>(o); };
  return s;
}

}  // namespace dlscale::models
