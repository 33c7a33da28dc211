// Object detection as MLPerf v0.5's SSD trains it: an image in; per default
// box 4 offsets and a score per class (background first) out; the multibox
// loss (smooth L1 on the matched boxes' offsets plus cross-entropy on the
// matched boxes and the 3 hardest background boxes per matched one, per
// image over its matched boxes, then averaged over the batch); throughput in
// images.
//
// Quality is not COCO's mAP, which needs non-maximum suppression and a
// ranking over the whole test set: the metrics are sums over samples, so the
// task measures per image the share of matched default boxes whose best
// class is right (box_acc) and their decoded boxes' mean IoU with the truth
// (box_iou).
//
// The synthetic task draws 1 to 3 objects per image, each a rectangle
// (sides 0.1 to 0.6 of the image) filled with its class's colour (drawn
// from the seed) over unit Gaussian noise, and encodes them against the
// default boxes as MLPerf's data pipeline does.
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>

#include "core/error.h"
#include "data/sampler.h"
#include "libtorch/models/detection.h"
#include "libtorch/models/model.h"

namespace dlscale::models {

namespace {

constexpr int64_t kMaxObjects = 3;
constexpr double kMinSide = 0.1;
constexpr double kMaxSide = 0.6;

/// (cx, cy, w, h) -> (left, top, right, bottom).
torch::Tensor to_ltrb(const torch::Tensor& b) {
  const torch::Tensor half = b.narrow(-1, 2, 2) / 2;
  return torch::cat({b.narrow(-1, 0, 2) - half, b.narrow(-1, 0, 2) + half}, -1);
}

torch::Tensor area(const torch::Tensor& ltrb) {
  return (ltrb.select(-1, 2) - ltrb.select(-1, 0)) * (ltrb.select(-1, 3) - ltrb.select(-1, 1));
}

/// IoU of ltrb boxes `a` and `b`, broadcast.
torch::Tensor iou_ltrb(const torch::Tensor& a, const torch::Tensor& b) {
  const torch::Tensor lt = torch::max(a.narrow(-1, 0, 2), b.narrow(-1, 0, 2));
  const torch::Tensor rb = torch::min(a.narrow(-1, 2, 2), b.narrow(-1, 2, 2));
  const torch::Tensor inter = (rb - lt).clamp_min(0).prod(-1);
  return inter / (area(a) + area(b) - inter).clamp_min(1e-12);
}

class Detection : public Task {
 public:
  std::string name() const override { return "detection"; }

  std::vector<TensorSpec> inputs(const ModelSpec& spec, const ModelOptions& o) const override {
    return {{data::kImage, torch::kFloat32, {spec.channels, o.image_size, o.image_size}}};
  }

  std::vector<TensorSpec> targets(const ModelSpec&, const ModelOptions& o) const override {
    return {{kBoxOffsets, torch::kFloat32, {kSsdDefaultBoxes, 4}},
            {kBoxLabels, torch::kInt64, {kSsdDefaultBoxes}, 0, o.num_classes}};
  }

  /// out.main: [batch, 4 + classes, 8732], the offsets first.
  torch::Tensor loss(const Output& out, const TensorMap& targets,
                     const LossOptions&) const override {
    namespace F = torch::nn::functional;
    const torch::Tensor loc = out.main.narrow(1, 0, 4);
    const torch::Tensor conf = out.main.narrow(1, 4, out.main.size(1) - 4);
    const torch::Tensor& labels = targets.at(kBoxLabels);
    const torch::Tensor truth = targets.at(kBoxOffsets).transpose(1, 2).to(loc.scalar_type());
    const torch::Tensor positive = labels.gt(0);
    const torch::Tensor matched = positive.sum(1);  // [batch]
    const auto none = F::SmoothL1LossFuncOptions().reduction(torch::kNone);
    const torch::Tensor box_loss = (F::smooth_l1_loss(loc, truth, none).sum(1) * positive).sum(1);
    const torch::Tensor class_loss =
        F::cross_entropy(conf, labels, F::CrossEntropyFuncOptions().reduction(torch::kNone));
    torch::Tensor rank;  // of each background box's loss, hardest first
    {
      torch::NoGradGuard no_grad;
      rank = class_loss.detach()
                 .masked_fill(positive, 0)
                 .argsort(1, /*descending=*/true)
                 .argsort(1, /*descending=*/false);
    }
    const torch::Tensor negatives =
        (kSsdNegativesPerPositive * matched).clamp_max(labels.size(1)).unsqueeze(1);
    const torch::Tensor chosen =
        positive.to(class_loss.scalar_type()) + rank.lt(negatives).to(class_loss.scalar_type());
    const torch::Tensor total = box_loss + (class_loss * chosen).sum(1);
    return (total * matched.gt(0) / matched.to(total.scalar_type()).clamp_min(1e-6)).mean();
  }

  std::vector<MetricSpec> metrics() const override {
    return {{"box_acc", "matched-box accuracy", true, true},
            {"box_iou", "matched-box IoU", true, false}};
  }

  /// Per image over its matched default boxes: the share whose best class is
  /// the truth, and the mean IoU of their decoded boxes with the truth's.
  std::vector<double> evaluate(const Output& out, const TensorMap& targets) const override {
    const torch::Tensor labels = targets.at(kBoxLabels).cpu();
    if (labels.size(0) == 0) return {0, 0};
    const torch::Tensor main = out.main.detach().cpu().to(torch::kFloat32);
    const torch::Tensor positive = labels.gt(0).to(torch::kFloat64);
    const torch::Tensor count = positive.sum(1).clamp_min(1);
    const torch::Tensor right =
        main.narrow(1, 4, main.size(1) - 4).argmax(1).eq(labels).to(torch::kFloat64);
    const torch::Tensor iou =
        box_iou_cxcywh(ssd_decode(main.narrow(1, 0, 4).transpose(1, 2)),
                       ssd_decode(targets.at(kBoxOffsets).cpu().to(torch::kFloat32)))
            .to(torch::kFloat64);
    return {((right * positive).sum(1) / count).sum().item<double>(),
            ((iou * positive).sum(1) / count).sum().item<double>()};
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
      const int64_t side = o.image_size;
      torch::Tensor image = torch::randn({channels, side, side}, gen, f32);
      const int64_t n = 1 + static_cast<int64_t>(h % kMaxObjects);
      const torch::Tensor u = torch::rand({n, 4}, gen, f32);
      const torch::Tensor classes =
          torch::randint(1, o.num_classes, {n}, gen, torch::TensorOptions(torch::kInt64));
      const torch::Tensor wh = kMinSide + (kMaxSide - kMinSide) * u.narrow(1, 0, 2);
      const torch::Tensor lt = u.narrow(1, 2, 2) * (1 - wh);
      const torch::Tensor ltrb = torch::cat({lt, lt + wh}, 1);
      const auto* b = ltrb.data_ptr<float>();
      for (int64_t k = 0; k < n; ++k) {  // later objects paint over earlier ones
        const auto px = [&](int64_t c) {
          return static_cast<int64_t>(std::lround(b[4 * k + c] * side));
        };
        const int64_t x0 = px(0), y0 = px(1);  // < side: a box starts at most 0.9 in
        const int64_t x1 = std::min(side, std::max(x0 + 1, px(2))),
                      y1 = std::min(side, std::max(y0 + 1, px(3)));
        image.narrow(1, y0, y1 - y0)
            .narrow(2, x0, x1 - x0)
            .copy_(colours[classes[k].item<int64_t>()]
                       .view({channels, 1, 1})
                       .expand({channels, y1 - y0, x1 - x0}));
      }
      auto [offsets, labels] = ssd_encode(ltrb, classes);
      data::Sample s;
      s.inputs[data::kImage] = image;
      s.targets[kBoxOffsets] = offsets;
      s.targets[kBoxLabels] = labels;
      return s;
    };
  }
};

}  // namespace

const torch::Tensor& ssd_default_boxes() {
  static const torch::Tensor boxes = [] {
    constexpr double kSteps[kSsdMaps] = {8, 16, 32, 64, 100, 300};
    constexpr double kScales[kSsdMaps + 1] = {21, 45, 99, 153, 207, 261, 315};
    std::vector<float> v;
    for (int64_t m = 0; m < kSsdMaps; ++m) {
      const double fk = kSsdImageSize / kSteps[m];
      const double s1 = kScales[m] / kSsdImageSize;
      const double s12 = std::sqrt(s1 * kScales[m + 1] / kSsdImageSize);
      std::vector<std::pair<double, double>> shapes = {{s1, s1}, {s12, s12}};
      for (double ratio : {2.0, 3.0}) {
        if (ratio == 3.0 && kSsdBoxesPerPosition[m] == 4) break;
        shapes.emplace_back(s1 * std::sqrt(ratio), s1 / std::sqrt(ratio));
        shapes.emplace_back(s1 / std::sqrt(ratio), s1 * std::sqrt(ratio));
      }
      for (const auto& [w, h] : shapes) {
        for (int64_t i = 0; i < kSsdMapSide[m]; ++i) {
          for (int64_t j = 0; j < kSsdMapSide[m]; ++j) {
            for (double x : {(j + 0.5) / fk, (i + 0.5) / fk, w, h}) {
              v.push_back(static_cast<float>(std::clamp(x, 0.0, 1.0)));
            }
          }
        }
      }
    }
    DLSCALE_ASSERT(static_cast<int64_t>(v.size()) == 4 * kSsdDefaultBoxes);
    return torch::tensor(v).view({kSsdDefaultBoxes, 4});
  }();
  return boxes;
}

std::pair<torch::Tensor, torch::Tensor> ssd_encode(const torch::Tensor& ltrb,
                                                   const torch::Tensor& classes) {
  const torch::Tensor& d = ssd_default_boxes();
  const torch::Tensor iou = iou_ltrb(ltrb.unsqueeze(1), to_ltrb(d).unsqueeze(0));  // [n, 8732]
  auto [best_iou, best_object] = iou.max(0);
  const torch::Tensor best_box = iou.argmax(1);
  for (int64_t k = 0; k < ltrb.size(0); ++k) {  // every object keeps its best box
    const int64_t box = best_box[k].item<int64_t>();
    best_iou[box] = 2.0;
    best_object[box] = k;
  }
  const torch::Tensor matched = best_iou.gt(kSsdMatchIou);
  const torch::Tensor labels =
      classes.index_select(0, best_object).masked_fill(matched.logical_not(), 0);
  const torch::Tensor truth = ltrb.index_select(0, best_object);
  const torch::Tensor xy = (truth.narrow(1, 0, 2) + truth.narrow(1, 2, 2)) / 2;
  const torch::Tensor wh = truth.narrow(1, 2, 2) - truth.narrow(1, 0, 2);
  const torch::Tensor dxy = d.narrow(1, 0, 2);
  const torch::Tensor dwh = d.narrow(1, 2, 2);
  const torch::Tensor offsets =
      torch::cat({(xy - dxy) / dwh / kSsdScaleXy, (wh / dwh).log() / kSsdScaleWh}, 1)
          .masked_fill(matched.logical_not().unsqueeze(1), 0);
  return {offsets, labels};
}

torch::Tensor ssd_decode(const torch::Tensor& offsets) {
  const torch::Tensor& d = ssd_default_boxes();
  const torch::Tensor dwh = d.narrow(1, 2, 2);
  return torch::cat({d.narrow(1, 0, 2) + offsets.narrow(-1, 0, 2) * kSsdScaleXy * dwh,
                     dwh * (offsets.narrow(-1, 2, 2) * kSsdScaleWh).exp()},
                    -1);
}

torch::Tensor class_colours(int64_t classes, int64_t channels, uint64_t seed) {
  at::Generator gen = at::detail::createCPUGenerator(seed);
  return torch::randn({classes, channels}, gen, torch::TensorOptions().dtype(torch::kFloat32));
}

torch::Tensor box_iou_cxcywh(const torch::Tensor& a, const torch::Tensor& b) {
  return iou_ltrb(to_ltrb(a), to_ltrb(b));
}

std::shared_ptr<const Task> detection() {
  static const auto task = std::make_shared<const Detection>();
  return task;
}

}  // namespace dlscale::models
