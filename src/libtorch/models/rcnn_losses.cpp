// The training of a two-stage detector's proposals and heads (rcnn_losses.h).
#include "libtorch/models/rcnn_losses.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>

#include "core/error.h"
#include "core/hash.h"
#include "libtorch/models/anchors.h"

namespace dlscale::models {

namespace {

namespace F = torch::nn::functional;

constexpr int64_t kRpnBatch = 256;
constexpr double kRpnPositiveFraction = 0.5;
constexpr double kRoiPositiveFraction = 0.25;
constexpr double kSmoothL1Beta = 1.0 / 9;

/// Summed smooth L1 at beta 1/9. (torch::nn::functional::smooth_l1_loss of
/// LibTorch 1.13 ignores its options' beta, which tests/models/
/// maskrcnn_parts_test.cpp's comparison with torchvision caught.)
torch::Tensor smooth_l1_sum(const torch::Tensor& input, const torch::Tensor& target) {
  return torch::smooth_l1_loss(input, target, at::Reduction::Sum, kSmoothL1Beta);
}

}  // namespace

std::vector<torch::Tensor> filter_proposals(const torch::Tensor& boxes,
                                            const torch::Tensor& objectness,
                                            const std::vector<int64_t>& per_level, int64_t height,
                                            int64_t width, const ProposalOptions& o) {
  const torch::Tensor scores_all = objectness.detach().to(torch::kFloat32);
  const torch::Tensor boxes_all = boxes.detach().to(torch::kFloat32);
  std::vector<torch::Tensor> top, levels;  // per level: indices into A, and their level
  int64_t offset = 0;
  for (size_t l = 0; l < per_level.size(); ++l) {
    const int64_t k = std::min(o.pre_nms_top_n, per_level[l]);
    const torch::Tensor level_scores = scores_all.narrow(1, offset, per_level[l]);
    top.push_back(std::get<1>(level_scores.topk(k, 1)) + offset);
    levels.push_back(torch::full({k}, static_cast<int64_t>(l), torch::kLong));
    offset += per_level[l];
  }
  DLSCALE_ASSERT(offset == scores_all.size(1));
  const torch::Tensor chosen = torch::cat(top, 1);  // [N, sum k]
  const torch::Tensor level = torch::cat(levels);
  std::vector<torch::Tensor> proposals;
  for (int64_t i = 0; i < chosen.size(0); ++i) {
    const torch::Tensor index = chosen[i];
    torch::Tensor b = clip_boxes(boxes_all[i].index_select(0, index), height, width);
    torch::Tensor s = torch::sigmoid(scores_all[i].index_select(0, index));
    torch::Tensor lv = level;
    const torch::Tensor big = boxes_at_least(b, o.min_size);
    b = b.index_select(0, big);
    s = s.index_select(0, big);
    lv = lv.index_select(0, big);
    const torch::Tensor keep = batched_nms(b, s, lv, o.nms_threshold).slice(0, 0, o.post_nms_top_n);
    proposals.push_back(b.index_select(0, keep));
  }
  return proposals;
}

uint64_t ground_truth_seed(const torch::Tensor& boxes, const torch::Tensor& classes) {
  const torch::Tensor b = boxes.detach().cpu().to(torch::kFloat32).contiguous();
  const torch::Tensor c = classes.detach().cpu().to(torch::kLong).contiguous();
  const uint64_t h = fnv1a(b.data_ptr(), static_cast<size_t>(b.numel()) * sizeof(float));
  return fnv1a(c.data_ptr(), static_cast<size_t>(c.numel()) * sizeof(int64_t), h);
}

LossPair rpn_loss(const torch::Tensor& objectness, const torch::Tensor& codes,
                  const torch::Tensor& anchors, const torch::Tensor& gt_boxes,
                  at::Generator& generator) {
  torch::Tensor labels, targets;
  {
    torch::NoGradGuard no_grad;
    if (gt_boxes.size(0) == 0) {
      labels = torch::zeros({anchors.size(0)}, torch::kLong);
      targets = torch::zeros({anchors.size(0), 4}, anchors.options());
    } else {
      const torch::Tensor matches = match_boxes(box_iou(gt_boxes, anchors), MatchOptions{});
      labels = matches.ge(0).to(torch::kLong);
      labels.masked_fill_(matches.eq(kBetweenThresholds), -1);
      targets = BoxCoder{}.encode(gt_boxes.index_select(0, matches.clamp_min(0)), anchors);
    }
  }
  const auto [pos, neg] = sample_balanced(labels, kRpnBatch, kRpnPositiveFraction, generator);
  const torch::Tensor sampled = torch::cat({pos, neg});
  const torch::Tensor logits = objectness.to(torch::kFloat32);
  LossPair loss;
  loss.classification = F::binary_cross_entropy_with_logits(
      logits.index_select(0, sampled), labels.index_select(0, sampled).to(torch::kFloat32));
  loss.box =
      smooth_l1_sum(codes.to(torch::kFloat32).index_select(0, pos), targets.index_select(0, pos)) /
      static_cast<double>(std::max<int64_t>(sampled.numel(), 1));
  return loss;
}

RoiSample sample_rois(const torch::Tensor& proposals, const torch::Tensor& gt_boxes,
                      const torch::Tensor& gt_classes, int64_t batch, at::Generator& generator) {
  torch::NoGradGuard no_grad;
  const torch::Tensor candidates = torch::cat({proposals, gt_boxes.to(proposals.scalar_type())});
  torch::Tensor labels, matches;
  if (gt_boxes.size(0) == 0) {
    labels = torch::zeros({candidates.size(0)}, torch::kLong);
    matches = torch::zeros({candidates.size(0)}, torch::kLong);
  } else {
    matches = match_boxes(box_iou(gt_boxes, candidates), MatchOptions{0.5, 0.5, false});
    labels = gt_classes.index_select(0, matches.clamp_min(0));
    labels.masked_fill_(matches.eq(kBelowLowThreshold), 0);
    labels.masked_fill_(matches.eq(kBetweenThresholds), -1);
  }
  const auto [pos, neg] = sample_balanced(labels, batch, kRoiPositiveFraction, generator);
  const torch::Tensor sampled = torch::cat({pos, neg});
  RoiSample s;
  s.boxes = candidates.index_select(0, sampled);
  s.labels = labels.index_select(0, sampled);
  s.positives = pos.numel();
  s.objects = matches.index_select(0, pos);
  s.targets = kRoiBoxCoder.encode(gt_boxes.index_select(0, s.objects).to(candidates.scalar_type()),
                                  candidates.index_select(0, pos));
  return s;
}

LossPair box_head_loss(const torch::Tensor& class_logits, const torch::Tensor& codes,
                       const RoiSample& sample) {
  const int64_t n = class_logits.size(0);
  LossPair loss;
  loss.classification = F::cross_entropy(class_logits.to(torch::kFloat32), sample.labels);
  const torch::Tensor positive = torch::arange(sample.positives, torch::kLong);
  const torch::Tensor mine = codes.to(torch::kFloat32)
                                 .view({n, -1, 4})
                                 .index({positive, sample.labels.slice(0, 0, sample.positives)});
  loss.box = smooth_l1_sum(mine, sample.targets.to(torch::kFloat32)) /
             static_cast<double>(std::max<int64_t>(n, 1));
  return loss;
}

torch::Tensor mask_targets(const torch::Tensor& masks, const torch::Tensor& boxes,
                           const torch::Tensor& objects, int64_t side) {
  torch::NoGradGuard no_grad;
  if (boxes.size(0) == 0) return torch::zeros({0, side, side}, masks.options());
  const torch::Tensor rois =
      torch::cat({objects.to(boxes.scalar_type()).unsqueeze(1), boxes}, 1).to(masks.scalar_type());
  RoiAlignOptions o;
  o.pooled_height = o.pooled_width = side;
  o.sampling_ratio = 0;
  return roi_align(masks.unsqueeze(1), rois, o).squeeze(1);
}

torch::Tensor mask_loss(const torch::Tensor& logits, const torch::Tensor& labels,
                        const torch::Tensor& targets) {
  if (targets.numel() == 0) return logits.sum().to(torch::kFloat32) * 0;
  const torch::Tensor mine =
      logits.to(torch::kFloat32).index({torch::arange(labels.size(0), torch::kLong), labels});
  return F::binary_cross_entropy_with_logits(mine, targets.to(torch::kFloat32));
}

}  // namespace dlscale::models
