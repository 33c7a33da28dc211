// LeNet as in TensorFlow's "deep MNIST" tutorial: two 5×5 SAME convolutions
// (32, 64 channels) with 2×2 max-pooling, a 1024-unit FC layer with dropout,
// and the classifier. LibTorch's default initialization.
#include "libtorch/models/layers.h"
#include "libtorch/models/zoo.h"

namespace dlscale::models {
namespace {

class LeNet : public ImageModel {
 public:
  explicit LeNet(const ModelOptions& o) {
    const int64_t side = o.image_size / 4;  // two 2×2 poolings, floor
    conv1_ = register_module("conv1", Conv(conv_options(1, 32, 5, 1, 2)));
    conv2_ = register_module("conv2", Conv(conv_options(32, 64, 5, 1, 2)));
    fc1_ = register_module("fc1", Fc(side * side * 64, 1024));
    dropout_ = register_module("dropout", torch::nn::Dropout(dropout_or(o, 0.5)));
    fc2_ = register_module("fc2", Fc(1024, o.num_classes));
  }

  Output forward_image(const torch::Tensor& x) override {
    torch::Tensor h = torch::max_pool2d(torch::relu(conv1_(x)), 2);
    h = torch::max_pool2d(torch::relu(conv2_(h)), 2);
    h = dropout_(torch::relu(fc1_(h.flatten(1))));
    return {fc2_(h), {}};
  }

 private:
  Conv conv1_{nullptr}, conv2_{nullptr};
  Fc fc1_{nullptr}, fc2_{nullptr};
  torch::nn::Dropout dropout_{nullptr};
};

}  // namespace

ModelSpec lenet_spec() {
  ModelSpec s = image_classifier_spec("lenet", "TensorFlow deep-MNIST CNN: 2 conv + 2 FC");
  s.channels = 1;
  s.default_image_size = 28;
  s.min_image_size = 4;
  s.default_classes = 10;
  s.make = [](const ModelOptions& o) { return std::make_shared<LeNet>(o); };
  return s;
}

}  // namespace dlscale::models
