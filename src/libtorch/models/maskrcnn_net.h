#pragma once
// Mask R-CNN's network (issue 46), as torchvision's
// maskrcnn_resnet50_fpn(num_classes) builds it for MLPerf v0.5's reference
// configuration (maskrcnn-benchmark's e2e_mask_rcnn_R_50_FPN_1x): a
// ResNet-50 with frozen batch norm whose stem and first stage are frozen
// too, an FPN (P2-P6, 256 channels), the RPN head (3 anchors a position),
// the box head (two FC of 1024 over RoIAlign 7x7) with its predictor, and
// the mask head (four 3x3 convolutions and a deconvolution over RoIAlign
// 14x14, 28x28 masks) with its predictor. Frozen weights are buffers, so
// that the strategies see only what trains. Not in the zoo yet: the region
// proposals, sampling and losses that train it are still to come
// (docs/models.md).
#include <torch/torch.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "libtorch/models/layers.h"

namespace dlscale::models {

/// Batch norm with fixed statistics and affine map (torchvision's
/// FrozenBatchNorm2d, eps 1e-5): four buffers, no parameters.
class FrozenBatchNormImpl : public torch::nn::Module {
 public:
  explicit FrozenBatchNormImpl(int64_t channels);
  torch::Tensor forward(const torch::Tensor& x);
  /// While on, each forward first sets the statistics to its input's
  /// (per channel over batch and pixels, biased variance).
  void set_calibrating(bool on) { calibrating_ = on; }

 private:
  torch::Tensor weight_, bias_, running_mean_, running_var_;
  bool calibrating_ = false;
};
TORCH_MODULE(FrozenBatchNorm);

/// A convolution without bias whose weight is a parameter, or a buffer when
/// `frozen`; counts its multiply-accumulates like Conv.
class BackboneConvImpl : public torch::nn::Module, public MacCounter {
 public:
  BackboneConvImpl(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t padding,
                   bool frozen);
  torch::Tensor forward(const torch::Tensor& x);
  int64_t last_macs_per_sample() const override { return out_positions_ * weight_.numel(); }
  void clear_macs() override { out_positions_ = 0; }
  const torch::Tensor& weight() const { return weight_; }

 private:
  torch::Tensor weight_;
  int64_t stride_, padding_;
  int64_t out_positions_ = 0;
};
TORCH_MODULE(BackboneConv);

/// ConvTranspose2d that counts its multiply-accumulates.
class DeconvImpl : public torch::nn::ConvTranspose2dImpl, public MacCounter {
 public:
  using torch::nn::ConvTranspose2dImpl::ConvTranspose2dImpl;
  torch::Tensor forward(const torch::Tensor& x);
  int64_t last_macs_per_sample() const override;
  void clear_macs() override { in_positions_ = 0; }

 private:
  int64_t in_positions_ = 0;
};
TORCH_MODULE(Deconv);

/// The pyramid's channels and the anchors per position.
inline constexpr int64_t kFpnChannels = 256;
inline constexpr int64_t kRpnAnchorsPerPosition = 3;

/// ResNet-50 and its FPN: an image batch in, P2-P6 out (strides 4 to 64).
/// The reference starts the ResNet from ImageNet's weights, which this
/// project does not ship. Its stand-in is the same on every worker and for
/// every --seed, as pretrained weights are: convolutions drawn (Kaiming,
/// fan-out) from a generator of a fixed seed, and frozen batch norms whose
/// statistics are those of a forward pass over two 128 x 128 images of
/// unit Gaussian noise from it, so that each normalises its input as a
/// trained batch norm does (identity statistics let the residual stream
/// grow block by block, and the first steps diverge). The FPN's weights
/// follow --seed, as the rest of the network's.
class ResnetFpnImpl : public torch::nn::Module {
 public:
  ResnetFpnImpl();
  std::vector<torch::Tensor> forward(const torch::Tensor& images);

 private:
  void stand_in_for_pretrained();

  BackboneConv conv1_{nullptr};
  FrozenBatchNorm bn1_{nullptr};
  std::vector<torch::nn::Sequential> stages_;
  std::vector<Conv> inner_, layer_;  // the FPN's lateral 1x1 and output 3x3 convolutions
};
TORCH_MODULE(ResnetFpn);

/// The RPN head: per pyramid level, the anchors' objectness logits
/// ([N, A, H, W]) and box codes ([N, 4 A, H, W]).
class RpnHeadImpl : public torch::nn::Module {
 public:
  RpnHeadImpl();
  std::pair<std::vector<torch::Tensor>, std::vector<torch::Tensor>> forward(
      const std::vector<torch::Tensor>& maps);

 private:
  Conv conv_{nullptr}, objectness_{nullptr}, codes_{nullptr};
};
TORCH_MODULE(RpnHead);

/// The box head and predictor: RoIAlign 7x7 features ([R, 256, 7, 7]) in,
/// class logits ([R, classes]) and per-class box codes ([R, 4 classes]) out.
class BoxHeadImpl : public torch::nn::Module {
 public:
  explicit BoxHeadImpl(int64_t classes);
  std::pair<torch::Tensor, torch::Tensor> forward(const torch::Tensor& pooled);

 private:
  Fc fc6_{nullptr}, fc7_{nullptr}, scores_{nullptr}, codes_{nullptr};
};
TORCH_MODULE(BoxHead);

/// The mask head and predictor: RoIAlign 14x14 features in, a 28x28 mask
/// logit per class out ([R, classes, 28, 28]).
class MaskHeadImpl : public torch::nn::Module {
 public:
  explicit MaskHeadImpl(int64_t classes);
  torch::Tensor forward(const torch::Tensor& pooled);

 private:
  std::vector<Conv> convs_;
  Deconv deconv_{nullptr};
  Conv logits_{nullptr};
};
TORCH_MODULE(MaskHead);

/// The whole network's modules (81 classes for COCO: 80 and background).
class MaskRcnnNetImpl : public torch::nn::Module {
 public:
  explicit MaskRcnnNetImpl(int64_t classes);
  ResnetFpn backbone{nullptr};
  RpnHead rpn{nullptr};
  BoxHead box{nullptr};
  MaskHead mask{nullptr};
};
TORCH_MODULE(MaskRcnnNet);

/// The elements of `module`'s frozen weights: its buffers other than batch
/// norm statistics (the frozen batch norms' weights and biases, the frozen
/// convolutions' weights), which torchvision counts as parameters.
int64_t frozen_weight_count(const torch::nn::Module& module);

}  // namespace dlscale::models
