// Mask R-CNN in the zoo (issue 46): maskrcnn_net.h's network trained as
// torchvision's maskrcnn_resnet50_fpn trains it, with the losses and
// sampling of rcnn_losses.h. In training the forward pass returns each
// image's five losses, in evaluation each image's metrics' parts
// (maskrcnn_task.cpp). Images are padded to a multiple of 32 pixels, as the
// reference pads its batches; proposals are clipped to the image itself.
#include "libtorch/models/maskrcnn.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <array>

#include "core/log.h"
#include "libtorch/data/data_source.h"
#include "libtorch/models/anchors.h"
#include "libtorch/models/maskrcnn_net.h"
#include "libtorch/models/rcnn_losses.h"
#include "libtorch/models/zoo.h"

namespace dlscale::models {

namespace {

constexpr int64_t kSizeDivisor = 32;
constexpr int64_t kBoxPool = 7;
constexpr int64_t kMaskPool = 14;
constexpr int64_t kMaskSide = 28;
/// At most a quarter of the sampled RoIs are positive: the mask head's most.
constexpr int64_t kMaskShare = 4;
/// Evaluation pools masks for at most this many matched proposals an image.
constexpr int64_t kEvalMasks = 64;
/// P2-P5 pool RoIs; P6 serves the RPN only.
const std::vector<double> kPoolScales = {1.0 / 4, 1.0 / 8, 1.0 / 16, 1.0 / 32};

/// One image's ground truth: its filled slots.
struct Truth {
  torch::Tensor boxes, classes, masks;
};

/// What the RPN made of a batch.
struct RpnOut {
  torch::Tensor objectness;              ///< [N, A] logits
  torch::Tensor codes;                   ///< [N, A, 4]
  torch::Tensor anchors;                 ///< [A, 4]
  std::vector<torch::Tensor> proposals;  ///< per image
};

/// RoIAlign's regions ([K, 5]) of image `image`'s `boxes` ([K, 4]).
torch::Tensor regions_of(int64_t image, const torch::Tensor& boxes) {
  return torch::cat(
      {torch::full({boxes.size(0), 1}, static_cast<double>(image), boxes.options()), boxes}, 1);
}

/// The regions of each image's boxes (`boxes[i]`: image i's), image by image.
torch::Tensor with_batch_index(const std::vector<torch::Tensor>& boxes) {
  std::vector<torch::Tensor> rows;
  for (size_t i = 0; i < boxes.size(); ++i)
    rows.push_back(regions_of(static_cast<int64_t>(i), boxes[i]));
  return torch::cat(rows);
}

class MaskRcnn : public Model {
 public:
  MaskRcnn(int64_t classes, int64_t rois, int64_t backbone_batch)
      : rois_(rois), backbone_batch_(backbone_batch) {
    net_ = register_module("maskrcnn", MaskRcnnNet(classes));
  }

  Output forward(const TensorMap& in) override {
    const torch::Tensor& images = in.at(data::kImage);
    std::vector<torch::Tensor> maps;
    const RpnOut rpn = propose(images, maps);
    std::vector<torch::Tensor> pool_maps;
    for (size_t l = 0; l < kPoolScales.size(); ++l)
      pool_maps.push_back(maps[l].to(torch::kFloat32));
    std::vector<Truth> truth;
    for (int64_t i = 0; i < images.size(0); ++i) truth.push_back(truth_of(in, i));
    if (is_training()) return {losses(rpn, pool_maps, truth), {}};
    return {metrics(rpn, pool_maps, truth), {}};
  }

  std::optional<OpCount> own_macs(const TensorMap& probe) override;

 private:
  static torch::Tensor pad(const torch::Tensor& images) {
    const auto up = [](int64_t x) { return (x + kSizeDivisor - 1) / kSizeDivisor * kSizeDivisor; };
    const int64_t h = images.size(2), w = images.size(3);
    if (up(h) == h && up(w) == w) return images;
    return torch::constant_pad_nd(images, {0, up(w) - w, 0, up(h) - h});
  }

  static Truth truth_of(const TensorMap& in, int64_t i) {
    const torch::Tensor filled = torch::nonzero(in.at(kGtClasses)[i].gt(0)).squeeze(1);
    return {in.at(kGtBoxes)[i].index_select(0, filled).to(torch::kFloat32),
            in.at(kGtClasses)[i].index_select(0, filled),
            in.at(kGtMasks)[i].index_select(0, filled).to(torch::kFloat32)};
  }

  /// The pyramid (`maps`) and the RPN's outputs of `images`, in passes of
  /// `backbone_batch_` images (the first of the batch, the next, ...): a
  /// convolution's rounding may depend on the batch's size, and the
  /// proposals' top-k and NMS decide on comparisons, so an image's proposals
  /// depend on the images of its pass, never on how many passes a worker's
  /// batch makes.
  RpnOut propose(const torch::Tensor& images, std::vector<torch::Tensor>& maps) {
    const int64_t n = images.size(0), height = images.size(2), width = images.size(3);
    std::vector<std::vector<torch::Tensor>> levels, objectness_of, codes_of;
    for (int64_t i = 0; i < n; i += backbone_batch_) {
      levels.push_back(net_->backbone(pad(images.narrow(0, i, std::min(backbone_batch_, n - i)))));
      auto [o, c] = net_->rpn(levels.back());
      objectness_of.push_back(std::move(o));
      codes_of.push_back(std::move(c));
    }
    const auto by_level = [](const std::vector<std::vector<torch::Tensor>>& per_pass, size_t l) {
      std::vector<torch::Tensor> parts;
      for (const auto& pass : per_pass) parts.push_back(pass[l]);
      return torch::cat(parts);
    };
    std::vector<torch::Tensor> objectness, codes;
    maps.clear();
    for (size_t l = 0; l < levels.front().size(); ++l) {
      maps.push_back(by_level(levels, l));
      objectness.push_back(by_level(objectness_of, l));
      codes.push_back(by_level(codes_of, l));
    }
    const int64_t padded_h = maps[0].size(2) * 4, padded_w = maps[0].size(3) * 4;
    std::vector<torch::Tensor> anchors, obj, cod;
    std::vector<int64_t> per_level;
    for (size_t l = 0; l < maps.size(); ++l) {
      const double size = static_cast<double>(int64_t{32} << l);
      anchors.push_back(grid_anchors(cell_anchors({size}, {0.5, 1.0, 2.0}), maps[l].size(2),
                                     maps[l].size(3), padded_h, padded_w));
      per_level.push_back(anchors.back().size(0));
      // [N, A, H, W] -> [N, H W A]; [N, 4 A, H, W] -> [N, H W A, 4]: the anchors' order.
      obj.push_back(objectness[l].permute({0, 2, 3, 1}).reshape({n, -1}));
      const int64_t a = codes[l].size(1) / 4;
      cod.push_back(codes[l]
                        .view({n, a, 4, codes[l].size(2), codes[l].size(3)})
                        .permute({0, 3, 4, 1, 2})
                        .reshape({n, -1, 4}));
    }
    RpnOut out;
    out.objectness = torch::cat(obj, 1);
    out.codes = torch::cat(cod, 1);
    out.anchors = torch::cat(anchors).to(torch::kFloat32);
    std::vector<torch::Tensor>
        boxes;  // image by image too: vector code and its tail may round apart
    for (int64_t i = 0; i < n; ++i)
      boxes.push_back(BoxCoder{}.decode(out.codes[i].detach().to(torch::kFloat32), out.anchors));
    ProposalOptions po;
    if (!is_training()) po.pre_nms_top_n = po.post_nms_top_n = 1000;
    out.proposals =
        filter_proposals(torch::stack(boxes), out.objectness, per_level, height, width, po);
    return out;
  }

  torch::Tensor pooled(const std::vector<torch::Tensor>& maps, const torch::Tensor& rois,
                       int64_t side) const {
    RoiAlignOptions o;
    o.pooled_height = o.pooled_width = side;
    return multiscale_roi_align(maps, kPoolScales, rois, o);
  }

  torch::Tensor losses(const RpnOut& rpn, const std::vector<torch::Tensor>& maps,
                       const std::vector<Truth>& truth);
  torch::Tensor metrics(const RpnOut& rpn, const std::vector<torch::Tensor>& maps,
                        const std::vector<Truth>& truth);
  std::array<double, 3> image_metrics(int64_t i, const torch::Tensor& proposals,
                                      const torch::Tensor& logits, const torch::Tensor& codes,
                                      const std::vector<torch::Tensor>& maps, const Truth& truth);

  /// 0 on every weight of the mask head: a batch without positives gives
  /// them zero gradients (as a worker whose batch has some gives them
  /// gradients), not none.
  torch::Tensor no_mask_loss() {
    torch::Tensor zero = torch::zeros({});
    for (const auto& p : net_->mask->parameters()) zero = zero + p.sum() * 0;
    return zero;
  }

  int64_t rois_;
  int64_t backbone_batch_;  ///< images a backbone and RPN pass takes (--backbone-batch)
  MaskRcnnNet net_{nullptr};
};

torch::Tensor MaskRcnn::losses(const RpnOut& rpn, const std::vector<torch::Tensor>& maps,
                               const std::vector<Truth>& truth) {
  const size_t n = truth.size();
  std::vector<LossPair> rpn_parts;
  std::vector<RoiSample> samples;
  std::vector<torch::Tensor> sampled, positive;
  for (size_t i = 0; i < n; ++i) {
    const auto index = static_cast<int64_t>(i);
    at::Generator gen =
        at::detail::createCPUGenerator(ground_truth_seed(truth[i].boxes, truth[i].classes));
    rpn_parts.push_back(
        rpn_loss(rpn.objectness[index], rpn.codes[index], rpn.anchors, truth[i].boxes, gen));
    samples.push_back(sample_rois(rpn.proposals[i], truth[i].boxes, truth[i].classes, rois_, gen));
    sampled.push_back(samples.back().boxes);
    positive.push_back(samples.back().boxes.slice(0, 0, samples.back().positives));
    DLSCALE_LOG_DEBUG(
        "maskrcnn: image {}: {} proposals, {} RoIs sampled, {} positive (the mask head's)", i,
        rpn.proposals[i].size(0), samples.back().boxes.size(0), samples.back().positives);
  }
  const auto [logits, codes] = net_->box(pooled(maps, with_batch_index(sampled), kBoxPool));
  // No positive in the whole batch: the mask head does not run (LibTorch
  // 1.13's convolution refuses an empty batch with channels-last weights).
  const torch::Tensor positive_rois = with_batch_index(positive);
  const torch::Tensor masks = positive_rois.size(0) > 0
                                  ? net_->mask(pooled(maps, positive_rois, kMaskPool))
                                  : torch::Tensor();
  const torch::Tensor no_mask = masks.defined() ? torch::Tensor() : no_mask_loss();
  std::vector<torch::Tensor> per_image;
  int64_t at = 0, at_mask = 0;
  for (size_t i = 0; i < n; ++i) {
    const RoiSample& s = samples[i];
    const int64_t count = s.boxes.size(0);
    const LossPair box = box_head_loss(logits.narrow(0, at, count), codes.narrow(0, at, count), s);
    const torch::Tensor positives = s.boxes.slice(0, 0, s.positives);
    const torch::Tensor mask =
        masks.defined()
            ? mask_loss(masks.narrow(0, at_mask, s.positives), s.labels.slice(0, 0, s.positives),
                        mask_targets(truth[i].masks, positives, s.objects, kMaskSide))
            : no_mask;
    per_image.push_back(torch::stack(
        {rpn_parts[i].classification, rpn_parts[i].box, box.classification, box.box, mask}));
    at += count;
    at_mask += s.positives;
  }
  return torch::stack(per_image);
}

/// Image `i`'s metrics over its proposals matched to an object (IoU 0.5),
/// the first kEvalMasks of them for the mask: class accuracy, box IoU for
/// the object's class, mask pixel accuracy. Zeros when none matched.
std::array<double, 3> MaskRcnn::image_metrics(int64_t i, const torch::Tensor& proposals,
                                              const torch::Tensor& logits,
                                              const torch::Tensor& codes,
                                              const std::vector<torch::Tensor>& maps,
                                              const Truth& truth) {
  if (truth.boxes.size(0) == 0 || proposals.size(0) == 0) return {0, 0, 0};
  const torch::Tensor matches =
      match_boxes(box_iou(truth.boxes, proposals), MatchOptions{0.5, 0.5, false});
  const torch::Tensor hit = torch::nonzero(matches.ge(0)).squeeze(1);
  if (hit.numel() == 0) return {0, 0, 0};
  const torch::Tensor objects = matches.index_select(0, hit);
  const torch::Tensor classes = truth.classes.index_select(0, objects);
  const torch::Tensor boxes = proposals.index_select(0, hit);
  const torch::Tensor all = torch::arange(hit.numel(), torch::kLong);
  std::array<double, 3> m{};
  m[0] =
      logits.index_select(0, hit).argmax(1).eq(classes).to(torch::kFloat64).mean().item<double>();
  const torch::Tensor decoded =
      kRoiBoxCoder.decode(codes.index_select(0, hit).to(torch::kFloat32), boxes)
          .view({hit.numel(), -1, 4})
          .index({all, classes});
  m[1] = box_iou(decoded, truth.boxes.index_select(0, objects))
             .diagonal()
             .nan_to_num(0)
             .to(torch::kFloat64)
             .mean()
             .item<double>();
  const int64_t k = std::min<int64_t>(hit.numel(), kEvalMasks);
  const torch::Tensor mask =
      net_->mask(pooled(maps, regions_of(i, boxes.slice(0, 0, k)), kMaskPool))
          .to(torch::kFloat32)
          .index({all.slice(0, 0, k), classes.slice(0, 0, k)});
  const torch::Tensor target =
      mask_targets(truth.masks, boxes.slice(0, 0, k), objects.slice(0, 0, k), kMaskSide);
  m[2] = mask.gt(0).eq(target.ge(0.5)).to(torch::kFloat64).mean().item<double>();
  return m;
}

torch::Tensor MaskRcnn::metrics(const RpnOut& rpn, const std::vector<torch::Tensor>& maps,
                                const std::vector<Truth>& truth) {
  const auto [logits, codes] = net_->box(pooled(maps, with_batch_index(rpn.proposals), kBoxPool));
  std::vector<torch::Tensor> per_image;
  int64_t at = 0;
  for (size_t i = 0; i < truth.size(); ++i) {
    const int64_t count = rpn.proposals[i].size(0);
    const std::array<double, 3> m =
        image_metrics(static_cast<int64_t>(i), rpn.proposals[i], logits.narrow(0, at, count),
                      codes.narrow(0, at, count), maps, truth[i]);
    per_image.push_back(torch::tensor({m[0], m[1], m[2]}, torch::kFloat64));
    at += count;
  }
  return torch::stack(per_image);
}

std::optional<OpCount> MaskRcnn::own_macs(const TensorMap& probe) {
  torch::NoGradGuard no_grad;
  for (auto& m : modules()) {
    if (auto* c = dynamic_cast<MacCounter*>(m.get())) c->clear_macs();
  }
  net_->rpn(net_->backbone(pad(probe.at(data::kImage).narrow(0, 0, 1).to(torch::kFloat32))));
  net_->box(torch::zeros({1, kFpnChannels, kBoxPool, kBoxPool}));
  net_->mask(torch::zeros({1, kFpnChannels, kMaskPool, kMaskPool}));
  OpCount count;
  const auto add = [&count](torch::nn::Module& part, int64_t times) {
    for (auto& m : part.modules()) {
      const auto* c = dynamic_cast<const MacCounter*>(m.get());
      if (c == nullptr) continue;
      OpCount::OpMacs op;
      op.macs = c->last_macs_per_sample() * times;
      for (const auto& p : m->parameters(/*recurse=*/false))
        op.operands.push_back(p.storage().unsafeGetStorageImpl());
      count.macs += op.macs;
      count.ops.push_back(std::move(op));
    }
  };
  add(*net_->backbone, 1);
  add(*net_->rpn, 1);
  add(*net_->box, rois_);
  add(*net_->mask, rois_ / kMaskShare);
  return count;
}

}  // namespace

ModelSpec maskrcnn_spec() {
  ModelSpec s;
  s.name = "maskrcnn";
  s.description =
      "Mask R-CNN (MLPerf v0.5): ResNet-50 FPN on frozen batch norm, RPN, box and mask heads "
      "on RoIAlign; 800x1333 (--image-size is the height)";
  s.task = instance_segmentation();
  s.family = "detection";
  s.takes = {"--image-size", "--classes", "--rois", "--backbone-batch"};
  s.channels = 3;
  s.default_image_size = kMaskRcnnHeight;
  // P6's stride: a smaller image has no pixel of its own at the pyramid's top.
  s.min_image_size = 64;
  s.default_classes = 81;  // COCO's 80 and the background
  s.min_classes = 2;
  s.default_rois = kMaskRcnnRois;
  s.default_backbone_batch = kMaskRcnnBackboneBatch;
  s.make = [](const ModelOptions& o) {
    return std::make_shared<MaskRcnn>(o.num_classes, o.rois, o.backbone_batch);
  };
  return s;
}

}  // namespace dlscale::models
