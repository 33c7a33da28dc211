#pragma once
// The region ops of two-stage detectors (Mask R-CNN, issue 46) that
// LibTorch 1.13 lacks in C++: RoIAlign (forward and backward), greedy
// non-maximum suppression for one category and per category, box IoU and
// the R-CNN box coding. Each follows the definition of torchvision's op of
// the same name (torchvision.ops.roi_align, nms, batched_nms, box_iou;
// models.detection._utils.BoxCoder), and tests/models/maskrcnn_parts_test.cpp
// checks values and gradients against torchvision on the same inputs.
// Boxes are (x1, y1, x2, y2) in input pixels.
#include <torch/torch.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <vector>

namespace dlscale::models {

/// How RoIAlign pools a region (torchvision.ops.roi_align's arguments).
struct RoiAlignOptions {
  int64_t pooled_height = 7;
  int64_t pooled_width = 7;
  /// Feature-map pixels per input pixel (1/4 for FPN's P2).
  double spatial_scale = 1.0;
  /// Bilinear samples per bin side; <= 0: ceil(region side / pooled side),
  /// region by region. MLPerf's Mask R-CNN samples 2.
  int64_t sampling_ratio = 2;
  /// Shift the region by half a pixel and let it be smaller than a pixel
  /// (Detectron2's); MLPerf's reference and torchvision's Mask R-CNN: false.
  bool aligned = false;
};

/// RoIAlign of `rois` ([R, 5]: batch index, x1, y1, x2, y2, the features'
/// dtype) over `features` ([N, C, H, W], float or double): [R, C, PH, PW],
/// each bin the mean of its bilinear samples (a sample beyond the map by
/// more than a pixel counts as 0). Differentiable with respect to
/// `features`; the regions get no gradient (detectors detach them). A shape,
/// dtype or batch index that does not fit is an Error naming it.
torch::Tensor roi_align(const torch::Tensor& features, const torch::Tensor& rois,
                        const RoiAlignOptions& options);

/// The pyramid level each box ([K, 4]) pools from, as an index from
/// `finest` (0 is level `finest`, P2 for Mask R-CNN): floor(4 + log2(
/// sqrt(area) / 224) + 1e-6) clamped to [finest, coarsest] (Lin et al.
/// 2017, eq. 1; torchvision's LevelMapper). int64.
torch::Tensor fpn_levels(const torch::Tensor& boxes, int64_t finest, int64_t coarsest);

/// RoIAlign over a feature pyramid: each region pools from the map of its
/// fpn_levels(). `maps[i]` ([N, C, H_i, W_i]) has the scale `scales[i]`,
/// each half the one before (1/4 ... 1/32); `options.spatial_scale` is
/// not used. Differentiable with respect to every map.
torch::Tensor multiscale_roi_align(const std::vector<torch::Tensor>& maps,
                                   const std::vector<double>& scales, const torch::Tensor& rois,
                                   const RoiAlignOptions& options);

/// Greedy non-maximum suppression: the indices (int64) of the boxes kept,
/// in decreasing score (ties in the order given). A box is dropped when its
/// IoU with a kept box of a higher score exceeds `iou_threshold`. `boxes`
/// [K, 4], `scores` [K], float or double.
torch::Tensor nms(const torch::Tensor& boxes, const torch::Tensor& scores, double iou_threshold);

/// nms() within each category of `categories` ([K], integer): boxes of
/// different categories never suppress each other. The kept indices in
/// decreasing score.
torch::Tensor batched_nms(const torch::Tensor& boxes, const torch::Tensor& scores,
                          const torch::Tensor& categories, double iou_threshold);

/// IoU of every box of `a` ([A, 4]) with every box of `b` ([B, 4]): [A, B].
/// Two empty boxes have no IoU (NaN), as in torchvision.
torch::Tensor box_iou(const torch::Tensor& a, const torch::Tensor& b);

/// Boxes clipped to an image of `height` x `width` pixels.
torch::Tensor clip_boxes(const torch::Tensor& boxes, int64_t height, int64_t width);

/// Indices of the boxes at least `min_size` pixels wide and high.
torch::Tensor boxes_at_least(const torch::Tensor& boxes, double min_size);

/// The R-CNN box coding: a box relative to a reference box as
/// (wx Δx/w, wy Δy/h, ww log(w'/w), wh log(h'/h)) of their centres and
/// sides. Decoding clips the log-scales at `clip` (log(1000/16)) so that no
/// prediction overflows.
struct BoxCoder {
  std::array<double, 4> weights{1.0, 1.0, 1.0, 1.0};  ///< wx, wy, ww, wh
  double clip = std::log(1000.0 / 16);

  /// The codes ([K, 4]) of `boxes` relative to `references` (both [K, 4]).
  torch::Tensor encode(const torch::Tensor& boxes, const torch::Tensor& references) const;
  /// The boxes ([K, 4 M]) that `codes` ([K, 4 M]: M boxes per reference)
  /// describe relative to `references` ([K, 4]).
  torch::Tensor decode(const torch::Tensor& codes, const torch::Tensor& references) const;
};

}  // namespace dlscale::models
