#pragma once
// Anchors and their assignment for region proposal networks (Mask R-CNN,
// issue 46): the anchors of a feature pyramid, the matching of predicted
// or anchor boxes to ground truth by IoU, and the balanced sampling of
// positives and negatives. Each follows torchvision's (AnchorGenerator,
// Matcher, BalancedPositiveNegativeSampler in models.detection), and
// tests/models/maskrcnn_parts_test.cpp checks the anchors and the matching
// against torchvision on the same inputs. Boxes are (x1, y1, x2, y2).
#include <torch/torch.h>

#include <cstdint>
#include <utility>
#include <vector>

namespace dlscale::models {

/// A cell's anchors ([R x S, 4], float, centred on 0, rounded to whole
/// pixels): for each aspect ratio r (height / width), each size s, a box of
/// width s / sqrt(r) and height s sqrt(r).
torch::Tensor cell_anchors(const std::vector<double>& sizes,
                           const std::vector<double>& aspect_ratios);

/// The anchors of one map of `grid_height` x `grid_width` cells of an
/// image of `image_height` x `image_width` pixels: `cell` shifted to each
/// cell (stride: image side / grid side, integer division), row by row,
/// the cell's anchors innermost. [H W A, 4].
torch::Tensor grid_anchors(const torch::Tensor& cell, int64_t grid_height, int64_t grid_width,
                           int64_t image_height, int64_t image_width);

/// What match_boxes() returns for a box that matched nothing.
inline constexpr int64_t kBelowLowThreshold = -1;
inline constexpr int64_t kBetweenThresholds = -2;

/// How boxes are matched to ground truth.
struct MatchOptions {
  double high = 0.7;  ///< IoU at or above which a box matches (the RPN's 0.7, the box head's 0.5)
  double low = 0.3;   ///< below it a box is background (kBelowLowThreshold)
  /// Also match each ground-truth box's best boxes whatever their IoU (the
  /// RPN's: every object gets an anchor).
  bool allow_low_quality = true;
};

/// For each box (column of `quality`, [M ground truth, N boxes] IoUs), the
/// ground truth it matches (the highest IoU, at or above `high`), or
/// kBelowLowThreshold / kBetweenThresholds. [N] int64. `quality` must
/// have at least one row.
torch::Tensor match_boxes(const torch::Tensor& quality, const MatchOptions& options);

/// A balanced sample of `labels` ([N]: 1 or more positive, 0 negative,
/// below 0 ignored): at most batch x positive_fraction positives, then
/// negatives up to `batch` in all, each drawn uniformly without
/// replacement (`generator`, or torch's default one). The positives' and
/// negatives' indices.
std::pair<torch::Tensor, torch::Tensor> sample_balanced(
    const torch::Tensor& labels, int64_t batch, double positive_fraction,
    c10::optional<at::Generator> generator = c10::nullopt);

}  // namespace dlscale::models
