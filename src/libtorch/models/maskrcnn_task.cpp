// Instance segmentation as MLPerf v0.5's Mask R-CNN trains it (maskrcnn.h):
// an image and its objects in; the network matches and samples its anchors
// and proposals against them and returns, per image, its five losses
// (rcnn_losses.h), which the task adds; throughput in images.
//
// Quality is not COCO's box and mask mAP, which rank every detection of the
// whole test set: the metrics are sums over samples, so the network
// measures per image over its proposals that overlap an object by IoU 0.5
// or more the share whose best class is the object's (box_acc), the IoU of
// their boxes for that class with the object's (box_iou) and the share of
// right pixels of their 28 x 28 masks (mask_acc).
//
// The synthetic task draws 1 to 3 objects per image, each an ellipse filling
// a box of sides 0.15 to 0.6 of the image's, painted in its class's colour
// (drawn from the seed) over unit Gaussian noise; later objects cover
// earlier ones, and the masks say which pixels each object shows.
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>

#include "data/sampler.h"
#include "libtorch/models/detection.h"
#include "libtorch/models/maskrcnn.h"
#include "libtorch/models/model.h"

namespace dlscale::models {

namespace {

constexpr double kObjectMinSide = 0.15;
constexpr double kObjectMaxSide = 0.6;

/// The pixels of an ellipse inscribed in the box [x0, x1) x [y0, y1) of an
/// image of `height` x `width`: [height, width] bool.
torch::Tensor ellipse(int64_t x0, int64_t y0, int64_t x1, int64_t y1, int64_t height,
                      int64_t width) {
  const auto f32 = torch::TensorOptions().dtype(torch::kFloat32);
  const double cx = 0.5 * static_cast<double>(x0 + x1), cy = 0.5 * static_cast<double>(y0 + y1);
  const double a = 0.5 * static_cast<double>(x1 - x0), b = 0.5 * static_cast<double>(y1 - y0);
  const torch::Tensor dx = ((torch::arange(width, f32) + 0.5 - cx) / a).square();
  const torch::Tensor dy = ((torch::arange(height, f32) + 0.5 - cy) / b).square();
  return (dy.unsqueeze(1) + dx.unsqueeze(0)).le(1.0);
}

class InstanceSegmentation : public Task {
 public:
  std::string name() const override { return "instance-segmentation"; }

  std::vector<TensorSpec> inputs(const ModelSpec& spec, const ModelOptions& o) const override {
    const int64_t h = o.image_size, w = maskrcnn_width(o.image_size);
    return {{data::kImage, torch::kFloat32, {spec.channels, h, w}},
            {kGtBoxes, torch::kFloat32, {kMaskRcnnSlots, 4}},
            {kGtClasses, torch::kInt64, {kMaskRcnnSlots}, 0, o.num_classes},
            {kGtMasks, torch::kFloat32, {kMaskRcnnSlots, h, w}}};
  }

  std::vector<TensorSpec> targets(const ModelSpec&, const ModelOptions&) const override {
    return {};
  }

  /// out.main: [batch, 5], each image's losses.
  torch::Tensor loss(const Output& out, const TensorMap&, const LossOptions&) const override {
    return out.main.sum(1).mean();
  }

  std::vector<MetricSpec> metrics() const override {
    return {{"box_acc", "matched-RoI accuracy", true, true},
            {"box_iou", "matched-RoI box IoU", true, true},
            {"mask_acc", "matched-RoI mask accuracy", true, true}};
  }

  /// out.main: [batch, 3], each image's metrics.
  std::vector<double> evaluate(const Output& out, const TensorMap&) const override {
    const torch::Tensor sums = out.main.detach().cpu().to(torch::kFloat64).sum(0);
    return {sums[0].item<double>(), sums[1].item<double>(), sums[2].item<double>()};
  }

  ThroughputUnit unit(const ModelSpec&, const ModelOptions&) const override {
    return {"images", 1};
  }

  data::SampleFn synthetic(const ModelSpec& spec, const ModelOptions& o,
                           uint64_t seed) const override {
    const auto f32 = torch::TensorOptions().dtype(torch::kFloat32);
    const torch::Tensor colours = class_colours(o.num_classes, spec.channels, seed);
    return [colours, seed, o, channels = spec.channels, f32](uint64_t index) {
      const uint64_t h = data::mix_seed(seed, index);
      at::Generator gen = at::detail::createCPUGenerator(h);
      const int64_t height = o.image_size, width = maskrcnn_width(o.image_size);
      torch::Tensor image = torch::randn({channels, height, width}, gen, f32);
      const int64_t n = 1 + static_cast<int64_t>(h % kMaskRcnnSlots);
      const torch::Tensor u = torch::rand({n, 4}, gen, f32);
      const torch::Tensor classes = torch::randint(1, o.num_classes, {n}, gen, torch::kInt64);
      torch::Tensor boxes = torch::zeros({kMaskRcnnSlots, 4}, f32);
      torch::Tensor labels = torch::zeros({kMaskRcnnSlots}, torch::kInt64);
      torch::Tensor masks = torch::zeros({kMaskRcnnSlots, height, width}, f32);
      const auto* r = u.data_ptr<float>();
      for (int64_t k = 0; k < n; ++k) {  // later objects paint over earlier ones
        const auto span = [&](float side_u, float start_u, int64_t extent) {
          const double side = kObjectMinSide + (kObjectMaxSide - kObjectMinSide) * side_u;
          const int64_t len = std::max<int64_t>(2, std::lround(side * static_cast<double>(extent)));
          const int64_t start = std::lround(start_u * static_cast<double>(extent - len));
          return std::pair{start, start + len};
        };
        const auto [x0, x1] = span(r[4 * k], r[4 * k + 2], width);
        const auto [y0, y1] = span(r[4 * k + 1], r[4 * k + 3], height);
        const torch::Tensor inside = ellipse(x0, y0, x1, y1, height, width);
        for (int64_t j = 0; j < k; ++j) masks[j].masked_fill_(inside, 0);
        masks[k].masked_fill_(inside, 1);
        image.copy_(torch::where(inside.unsqueeze(0),
                                 colours[classes[k].item<int64_t>()].view({channels, 1, 1}),
                                 image));
        boxes[k] = torch::tensor({static_cast<float>(x0), static_cast<float>(y0),
                                  static_cast<float>(x1), static_cast<float>(y1)});
        labels[k] = classes[k];
      }
      data::Sample s;
      s.inputs[data::kImage] = image;
      s.inputs[kGtBoxes] = boxes;
      s.inputs[kGtClasses] = labels;
      s.inputs[kGtMasks] = masks;
      return s;
    };
  }
};

}  // namespace

std::shared_ptr<const Task> instance_segmentation() {
  static const auto task = std::make_shared<const InstanceSegmentation>();
  return task;
}

}  // namespace dlscale::models
