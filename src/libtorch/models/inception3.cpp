// Inception v3 as in torchvision (Szegedy et al. 2016): batch norm (eps 1e-3)
// after every convolution, factorized 1×7/7×1 and 1×3/3×1 branches, optional
// auxiliary classifier after Mixed_6e, truncated-normal initialization.
#include "libtorch/models/layers.h"
#include "libtorch/models/zoo.h"

namespace dlscale::models {
namespace {

constexpr double kInceptionBnEps = 1e-3;
using Pair = torch::ExpandingArray<2>;

ConvBnRelu bc(int64_t in, int64_t out, Pair kernel, Pair stride = 1, Pair padding = 0) {
  return ConvBnRelu(conv_options(in, out, kernel, stride, padding), kInceptionBnEps);
}

torch::Tensor avg_pool_3s1(const torch::Tensor& x) { return torch::avg_pool2d(x, 3, 1, 1); }

/// Runs the blocks of a Sequential-like branch in order.
class BranchImpl : public torch::nn::Module {
 public:
  explicit BranchImpl(std::vector<ConvBnRelu> convs) {
    for (size_t i = 0; i < convs.size(); ++i) {
      convs_.push_back(register_module(std::to_string(i), convs[i]));
    }
  }
  torch::Tensor forward(torch::Tensor x) {
    for (auto& c : convs_) x = c(x);
    return x;
  }

 private:
  std::vector<ConvBnRelu> convs_;
};
TORCH_MODULE(Branch);

class InceptionAImpl : public torch::nn::Module {
 public:
  InceptionAImpl(int64_t in, int64_t pool_features) {
    b1_ = register_module("branch1x1", bc(in, 64, 1));
    b5_ = register_module("branch5x5", Branch(std::vector<ConvBnRelu>{bc(in, 48, 1), bc(48, 64, 5, 1, 2)}));
    b3_ = register_module("branch3x3dbl", Branch(std::vector<ConvBnRelu>{
                                              bc(in, 64, 1), bc(64, 96, 3, 1, 1), bc(96, 96, 3, 1, 1)}));
    bp_ = register_module("branch_pool", bc(in, pool_features, 1));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    return torch::cat({b1_(x), b5_(x), b3_(x), bp_(avg_pool_3s1(x))}, 1);
  }

 private:
  ConvBnRelu b1_{nullptr}, bp_{nullptr};
  Branch b5_{nullptr}, b3_{nullptr};
};
TORCH_MODULE(InceptionA);

class InceptionBImpl : public torch::nn::Module {
 public:
  explicit InceptionBImpl(int64_t in) {
    b3_ = register_module("branch3x3", bc(in, 384, 3, 2));
    b3d_ = register_module("branch3x3dbl", Branch(std::vector<ConvBnRelu>{
                                               bc(in, 64, 1), bc(64, 96, 3, 1, 1), bc(96, 96, 3, 2)}));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    return torch::cat({b3_(x), b3d_(x), torch::max_pool2d(x, 3, 2)}, 1);
  }

 private:
  ConvBnRelu b3_{nullptr};
  Branch b3d_{nullptr};
};
TORCH_MODULE(InceptionB);

class InceptionCImpl : public torch::nn::Module {
 public:
  InceptionCImpl(int64_t in, int64_t c7) {
    const Pair k17{1, 7}, k71{7, 1}, p03{0, 3}, p30{3, 0};
    b1_ = register_module("branch1x1", bc(in, 192, 1));
    b7_ = register_module("branch7x7", Branch(std::vector<ConvBnRelu>{
                                           bc(in, c7, 1), bc(c7, c7, k17, 1, p03), bc(c7, 192, k71, 1, p30)}));
    b7d_ = register_module("branch7x7dbl",
                           Branch(std::vector<ConvBnRelu>{bc(in, c7, 1), bc(c7, c7, k71, 1, p30),
                                                          bc(c7, c7, k17, 1, p03), bc(c7, c7, k71, 1, p30),
                                                          bc(c7, 192, k17, 1, p03)}));
    bp_ = register_module("branch_pool", bc(in, 192, 1));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    return torch::cat({b1_(x), b7_(x), b7d_(x), bp_(avg_pool_3s1(x))}, 1);
  }

 private:
  ConvBnRelu b1_{nullptr}, bp_{nullptr};
  Branch b7_{nullptr}, b7d_{nullptr};
};
TORCH_MODULE(InceptionC);

class InceptionDImpl : public torch::nn::Module {
 public:
  explicit InceptionDImpl(int64_t in) {
    const Pair k17{1, 7}, k71{7, 1}, p03{0, 3}, p30{3, 0};
    b3_ = register_module("branch3x3", Branch(std::vector<ConvBnRelu>{bc(in, 192, 1), bc(192, 320, 3, 2)}));
    b7_ = register_module("branch7x7x3",
                          Branch(std::vector<ConvBnRelu>{bc(in, 192, 1), bc(192, 192, k17, 1, p03),
                                                         bc(192, 192, k71, 1, p30), bc(192, 192, 3, 2)}));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    return torch::cat({b3_(x), b7_(x), torch::max_pool2d(x, 3, 2)}, 1);
  }

 private:
  Branch b3_{nullptr}, b7_{nullptr};
};
TORCH_MODULE(InceptionD);

class InceptionEImpl : public torch::nn::Module {
 public:
  explicit InceptionEImpl(int64_t in) {
    const Pair k13{1, 3}, k31{3, 1}, p01{0, 1}, p10{1, 0};
    b1_ = register_module("branch1x1", bc(in, 320, 1));
    b3_1_ = register_module("branch3x3_1", bc(in, 384, 1));
    b3_2a_ = register_module("branch3x3_2a", bc(384, 384, k13, 1, p01));
    b3_2b_ = register_module("branch3x3_2b", bc(384, 384, k31, 1, p10));
    bd_1_ = register_module("branch3x3dbl_1", bc(in, 448, 1));
    bd_2_ = register_module("branch3x3dbl_2", bc(448, 384, 3, 1, 1));
    bd_3a_ = register_module("branch3x3dbl_3a", bc(384, 384, k13, 1, p01));
    bd_3b_ = register_module("branch3x3dbl_3b", bc(384, 384, k31, 1, p10));
    bp_ = register_module("branch_pool", bc(in, 192, 1));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    torch::Tensor b3 = b3_1_(x);
    b3 = torch::cat({b3_2a_(b3), b3_2b_(b3)}, 1);
    torch::Tensor bd = bd_2_(bd_1_(x));
    bd = torch::cat({bd_3a_(bd), bd_3b_(bd)}, 1);
    return torch::cat({b1_(x), b3, bd, bp_(avg_pool_3s1(x))}, 1);
  }

 private:
  ConvBnRelu b1_{nullptr}, b3_1_{nullptr}, b3_2a_{nullptr}, b3_2b_{nullptr}, bd_1_{nullptr},
      bd_2_{nullptr}, bd_3a_{nullptr}, bd_3b_{nullptr}, bp_{nullptr};
};
TORCH_MODULE(InceptionE);

class InceptionAuxImpl : public torch::nn::Module {
 public:
  InceptionAuxImpl(int64_t in, int64_t classes) {
    conv0_ = register_module("conv0", bc(in, 128, 1));
    conv1_ = register_module("conv1", bc(128, 768, 5));
    fc_ = register_module("fc", Fc(768, classes));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    torch::Tensor h = conv1_(conv0_(torch::avg_pool2d(x, 5, 3)));
    return fc_(torch::adaptive_avg_pool2d(h, {1, 1}).flatten(1));
  }
  ConvBnRelu conv0_{nullptr}, conv1_{nullptr};
  Fc fc_{nullptr};
};
TORCH_MODULE(InceptionAux);

class Inception3 : public ImageModel {
 public:
  explicit Inception3(const ModelOptions& o) {
    stem_ = register_module("stem", Branch(std::vector<ConvBnRelu>{bc(3, 32, 3, 2), bc(32, 32, 3),
                                                                   bc(32, 64, 3, 1, 1)}));
    stem2_ = register_module("stem2", Branch(std::vector<ConvBnRelu>{bc(64, 80, 1), bc(80, 192, 3)}));
    mixed5_ = register_module("mixed5", torch::nn::Sequential(InceptionA(192, 32), InceptionA(256, 64),
                                                              InceptionA(288, 64), InceptionB(288)));
    mixed6_ = register_module("mixed6",
                              torch::nn::Sequential(InceptionC(768, 128), InceptionC(768, 160),
                                                    InceptionC(768, 160), InceptionC(768, 192)));
    if (o.aux_logits) aux_ = register_module("aux", InceptionAux(768, o.num_classes));
    mixed7_ = register_module("mixed7", torch::nn::Sequential(InceptionD(768), InceptionE(1280),
                                                              InceptionE(2048)));
    dropout_ = register_module("dropout", torch::nn::Dropout(dropout_or(o, 0.5)));
    fc_ = register_module("fc", Fc(2048, o.num_classes));
    torch::NoGradGuard no_grad;
    for (auto& m : modules(/*include_self=*/false)) {
      if (auto* conv = m->as<ConvImpl>()) init_trunc_normal(conv->weight, 0.1);
      if (auto* fc = m->as<FcImpl>()) init_trunc_normal(fc->weight, 0.1);
    }
    if (aux_) {  // torchvision's per-layer stddev attributes
      init_trunc_normal(aux_->conv1_->conv->weight, 0.01);
      init_trunc_normal(aux_->fc_->weight, 0.001);
    }
    init_batchnorm_identity(*this);
  }

  Output forward_image(const torch::Tensor& x) override {
    Output out;
    torch::Tensor h = torch::max_pool2d(stem_(x), 3, 2);
    h = torch::max_pool2d(stem2_(h), 3, 2);
    h = mixed6_->forward(mixed5_->forward(h));
    if (aux_ && is_training()) out.aux.push_back(aux_(h));
    h = mixed7_->forward(h);
    h = torch::adaptive_avg_pool2d(h, {1, 1}).flatten(1);
    out.main = fc_(dropout_(h));
    return out;
  }

 private:
  Branch stem_{nullptr}, stem2_{nullptr};
  torch::nn::Sequential mixed5_{nullptr}, mixed6_{nullptr}, mixed7_{nullptr};
  InceptionAux aux_{nullptr};
  torch::nn::Dropout dropout_{nullptr};
  Fc fc_{nullptr};
};

}  // namespace

ModelSpec inception3_spec() {
  ModelSpec s = image_classifier_spec("inception3", "Inception v3 (torchvision)");
  s.default_image_size = 299;
  s.min_image_size = 75;        // torchvision's documented minimum
  s.takes.push_back("--aux-logits");
  s.min_image_size_aux = 299;   // the aux head pools 5×5/3 then convolves 5×5 at Mixed_6e
  s.aux_loss_weight = 0.4;
  s.make = [](const ModelOptions& o) { return std::make_shared<Inception3>(o); };
  return s;
}

}  // namespace dlscale::models
