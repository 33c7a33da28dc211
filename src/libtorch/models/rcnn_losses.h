#pragma once
// What trains a two-stage detector (Mask R-CNN, issue 46), as torchvision's
// models.detection builds it: the RPN's proposals (per-level top-k, clipping,
// the size filter, NMS per level, a post-NMS top-k), the RPN's loss over
// anchors matched and sampled against the ground truth, the RoI heads'
// sampling of proposals, and the box and mask losses. Unlike torchvision,
// every loss is normalised per image, and every random draw comes from a
// generator seeded by the image's own ground truth: an image's losses then
// depend on nothing else in its batch, so N workers can match one worker on
// the global batch (docs/models.md). Boxes are (x1, y1, x2, y2) in pixels.
#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "libtorch/models/roi_ops.h"

namespace dlscale::models {

/// How the RPN turns anchors into proposals (torchvision's defaults, which
/// are the reference's: 2000 a level and 2000 kept in training, 1000 and
/// 1000 in evaluation).
struct ProposalOptions {
  int64_t pre_nms_top_n = 2000;   ///< per level, by objectness
  int64_t post_nms_top_n = 2000;  ///< per image, after NMS
  double nms_threshold = 0.7;
  double min_size = 1e-3;
};

/// Each image's proposals ([K_i, 4], detached, by decreasing objectness) from
/// its decoded anchor boxes `boxes` ([N, A, 4]) and their `objectness`
/// logits ([N, A]), the anchors grouped by level (`per_level` of them each),
/// clipped to an image of `height` x `width`.
std::vector<torch::Tensor> filter_proposals(const torch::Tensor& boxes,
                                            const torch::Tensor& objectness,
                                            const std::vector<int64_t>& per_level, int64_t height,
                                            int64_t width, const ProposalOptions& options);

/// A seed for an image's random draws from its ground truth alone
/// (`boxes` [G, 4] float, `classes` [G] int64).
uint64_t ground_truth_seed(const torch::Tensor& boxes, const torch::Tensor& classes);

/// Two parts of a loss.
struct LossPair {
  torch::Tensor classification;  ///< objectness or class
  torch::Tensor box;             ///< box regression
};

/// The RPN's loss for one image: its anchors ([A, 4]) matched to the ground
/// truth ([G, 4], G may be 0: every anchor is background) at IoU 0.7 / 0.3
/// (each object keeps its best anchors), 256 sampled with at most half
/// positive; binary cross-entropy of `objectness` ([A]) over the sample's
/// mean, smooth L1 (beta 1/9) of `codes` ([A, 4]) over the positives summed
/// and divided by the sample's size.
LossPair rpn_loss(const torch::Tensor& objectness, const torch::Tensor& codes,
                  const torch::Tensor& anchors, const torch::Tensor& gt_boxes,
                  at::Generator& generator);

/// The RoIs the box head trains on for one image: positives first.
struct RoiSample {
  torch::Tensor boxes;    ///< [S, 4] proposals (detached)
  torch::Tensor labels;   ///< [S] int64: the matched object's class, 0 background
  torch::Tensor targets;  ///< [P, 4] each positive's object's codes (weights 10, 10, 5, 5)
  torch::Tensor objects;  ///< [P] int64: each positive's object
  int64_t positives = 0;
};

/// Samples `batch` RoIs (at most a quarter positive) from `proposals` and
/// the ground truth's boxes, matched at IoU 0.5.
RoiSample sample_rois(const torch::Tensor& proposals, const torch::Tensor& gt_boxes,
                      const torch::Tensor& gt_classes, int64_t batch, at::Generator& generator);

/// The box coder of the RoI heads: weights 10, 10, 5, 5.
inline const BoxCoder kRoiBoxCoder{{10.0, 10.0, 5.0, 5.0}};

/// The box head's loss over a sample: cross-entropy of `class_logits`
/// ([S, C]) over the sample's mean, smooth L1 (beta 1/9) of the positives'
/// codes for their class (`codes` [S, 4 C]) summed and divided by S.
LossPair box_head_loss(const torch::Tensor& class_logits, const torch::Tensor& codes,
                       const RoiSample& sample);

/// Each positive's mask target ([P, side, side]): its object's mask
/// (`masks` [G, H, W] float) pooled over its box by RoIAlign (adaptive
/// sampling, not aligned), as torchvision's project_masks_on_boxes.
torch::Tensor mask_targets(const torch::Tensor& masks, const torch::Tensor& boxes,
                           const torch::Tensor& objects, int64_t side);

/// Binary cross-entropy of each positive's mask logits for its class
/// (`logits` [P, C, M, M], `labels` [P]) against `targets` ([P, M, M]),
/// the mean over pixels; 0 (attached to the graph) when P is 0.
torch::Tensor mask_loss(const torch::Tensor& logits, const torch::Tensor& labels,
                        const torch::Tensor& targets);

}  // namespace dlscale::models
