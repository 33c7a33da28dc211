// GoogLeNet (Inception v1) as in torchvision, including its choice of a 3×3
// (not 5×5) convolution in the "5×5" branch, batch norm (eps 1e-3) after every
// convolution, and optional auxiliary classifiers after inception 4a and 4d.
#include "libtorch/models/layers.h"
#include "libtorch/models/zoo.h"

namespace dlscale::models {
namespace {

constexpr double kGoogLeNetBnEps = 1e-3;

ConvBnRelu basic_conv(int64_t in, int64_t out, int64_t kernel, int64_t stride = 1,
                      int64_t padding = 0) {
  return ConvBnRelu(conv_options(in, out, kernel, stride, padding), kGoogLeNetBnEps);
}

torch::Tensor max_pool_ceil(const torch::Tensor& x, int64_t kernel, int64_t stride,
                            int64_t padding = 0) {
  return torch::max_pool2d(x, kernel, stride, padding, /*dilation=*/1, /*ceil_mode=*/true);
}

class InceptionImpl : public torch::nn::Module {
 public:
  InceptionImpl(int64_t in, int64_t c1, int64_t c3r, int64_t c3, int64_t c5r, int64_t c5,
                int64_t pool_proj) {
    b1_ = register_module("branch1", basic_conv(in, c1, 1));
    b2_ = register_module("branch2",
                          torch::nn::Sequential(basic_conv(in, c3r, 1), basic_conv(c3r, c3, 3, 1, 1)));
    b3_ = register_module("branch3",
                          torch::nn::Sequential(basic_conv(in, c5r, 1), basic_conv(c5r, c5, 3, 1, 1)));
    b4_ = register_module("branch4", basic_conv(in, pool_proj, 1));
  }

  torch::Tensor forward(const torch::Tensor& x) {
    return torch::cat({b1_(x), b2_->forward(x), b3_->forward(x), b4_(max_pool_ceil(x, 3, 1, 1))},
                      1);
  }

 private:
  ConvBnRelu b1_{nullptr}, b4_{nullptr};
  torch::nn::Sequential b2_{nullptr}, b3_{nullptr};
};
TORCH_MODULE(Inception);

class GoogLeNetAuxImpl : public torch::nn::Module {
 public:
  GoogLeNetAuxImpl(int64_t in, int64_t classes, double dropout) {
    conv_ = register_module("conv", basic_conv(in, 128, 1));
    fc1_ = register_module("fc1", Fc(2048, 1024));
    fc2_ = register_module("fc2", Fc(1024, classes));
    dropout_ = register_module("dropout", torch::nn::Dropout(dropout));
  }

  torch::Tensor forward(const torch::Tensor& x) {
    torch::Tensor h = conv_(torch::adaptive_avg_pool2d(x, {4, 4})).flatten(1);
    return fc2_(dropout_(fc1_(h).relu_()));
  }

 private:
  ConvBnRelu conv_{nullptr};
  Fc fc1_{nullptr}, fc2_{nullptr};
  torch::nn::Dropout dropout_{nullptr};
};
TORCH_MODULE(GoogLeNetAux);

class GoogLeNet : public ImageModel {
 public:
  explicit GoogLeNet(const ModelOptions& o) {
    conv1_ = register_module("conv1", basic_conv(3, 64, 7, 2, 3));
    conv2_ = register_module("conv2", basic_conv(64, 64, 1));
    conv3_ = register_module("conv3", basic_conv(64, 192, 3, 1, 1));
    i3a_ = register_module("inception3a", Inception(192, 64, 96, 128, 16, 32, 32));
    i3b_ = register_module("inception3b", Inception(256, 128, 128, 192, 32, 96, 64));
    i4a_ = register_module("inception4a", Inception(480, 192, 96, 208, 16, 48, 64));
    i4b_ = register_module("inception4b", Inception(512, 160, 112, 224, 24, 64, 64));
    i4c_ = register_module("inception4c", Inception(512, 128, 128, 256, 24, 64, 64));
    i4d_ = register_module("inception4d", Inception(512, 112, 144, 288, 32, 64, 64));
    i4e_ = register_module("inception4e", Inception(528, 256, 160, 320, 32, 128, 128));
    i5a_ = register_module("inception5a", Inception(832, 256, 160, 320, 32, 128, 128));
    i5b_ = register_module("inception5b", Inception(832, 384, 192, 384, 48, 128, 128));
    if (o.aux_logits) {
      aux1_ = register_module("aux1", GoogLeNetAux(512, o.num_classes, dropout_or(o, 0.7)));
      aux2_ = register_module("aux2", GoogLeNetAux(528, o.num_classes, dropout_or(o, 0.7)));
    }
    dropout_ = register_module("dropout", torch::nn::Dropout(dropout_or(o, 0.2)));
    fc_ = register_module("fc", Fc(1024, o.num_classes));
    torch::NoGradGuard no_grad;
    for (auto& m : modules(/*include_self=*/false)) {
      if (auto* conv = m->as<ConvImpl>()) init_trunc_normal(conv->weight, 0.01);
      if (auto* fc = m->as<FcImpl>()) init_trunc_normal(fc->weight, 0.01);
    }
    init_batchnorm_identity(*this);
  }

  Output forward_image(const torch::Tensor& x) override {
    Output out;
    torch::Tensor h = max_pool_ceil(conv1_(x), 3, 2);
    h = max_pool_ceil(conv3_(conv2_(h)), 3, 2);
    h = max_pool_ceil(i3b_(i3a_(h)), 3, 2);
    h = i4a_(h);
    const bool aux = aux1_ && is_training();
    if (aux) out.aux.push_back(aux1_(h));
    h = i4d_(i4c_(i4b_(h)));
    if (aux) out.aux.push_back(aux2_(h));
    h = max_pool_ceil(i4e_(h), 2, 2);
    h = i5b_(i5a_(h));
    h = torch::adaptive_avg_pool2d(h, {1, 1}).flatten(1);
    out.main = fc_(dropout_(h));
    return out;
  }

 private:
  ConvBnRelu conv1_{nullptr}, conv2_{nullptr}, conv3_{nullptr};
  Inception i3a_{nullptr}, i3b_{nullptr}, i4a_{nullptr}, i4b_{nullptr}, i4c_{nullptr},
      i4d_{nullptr}, i4e_{nullptr}, i5a_{nullptr}, i5b_{nullptr};
  GoogLeNetAux aux1_{nullptr}, aux2_{nullptr};
  torch::nn::Dropout dropout_{nullptr};
  Fc fc_{nullptr};
};

}  // namespace

ModelSpec googlenet_spec() {
  ModelSpec s =
      image_classifier_spec("googlenet", "GoogLeNet / Inception v1 (torchvision, batch norm)");
  s.default_image_size = 224;
  // The unpadded 3×3/2 max-pools (ceil mode) need >= 2 pixels in; below 15
  // the third one sees a 1×1 map. The aux heads pool adaptively: no extra limit.
  s.min_image_size = 15;
  s.takes.push_back("--aux-logits");
  s.min_image_size_aux = 15;
  s.aux_loss_weight = 0.3;
  s.make = [](const ModelOptions& o) { return std::make_shared<GoogLeNet>(o); };
  return s;
}

}  // namespace dlscale::models
