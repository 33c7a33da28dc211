#pragma once
// What the detector (ssd300, ssd.cpp) and its task (detection_task.cpp)
// share: the tensors' names and SSD300's default boxes with their encoding,
// as MLPerf v0.5's single-stage detector defines them.
#include <torch/torch.h>

#include <cstdint>

namespace dlscale::models {

inline constexpr const char* kBoxOffsets = "boxes";  ///< [batch, 8732, 4] encoded offsets (float)
inline constexpr const char* kBoxLabels =
    "box_labels";  ///< [batch, 8732] class per default box, 0 = background

inline constexpr int64_t kSsdImageSize = 300;
inline constexpr int64_t kSsdMaps = 6;
/// Feature maps' sides (38, 19, 10, 5, 3, 1) and default boxes per position.
inline constexpr int64_t kSsdMapSide[kSsdMaps] = {38, 19, 10, 5, 3, 1};
inline constexpr int64_t kSsdBoxesPerPosition[kSsdMaps] = {4, 6, 6, 6, 4, 4};
inline constexpr int64_t kSsdDefaultBoxes = 8732;
/// A default box is matched to an object it overlaps by more than this IoU.
inline constexpr double kSsdMatchIou = 0.5;
/// Offsets are (Δx/w, Δy/h) / 0.1 and log(w'/w, h'/h) / 0.2 (SSD's variances).
inline constexpr double kSsdScaleXy = 0.1;
inline constexpr double kSsdScaleWh = 0.2;
/// Hard-negative mining keeps this many background boxes per matched one.
inline constexpr int64_t kSsdNegativesPerPositive = 3;

/// SSD300's 8,732 default boxes, [8732, 4] as (cx, cy, w, h) in [0, 1], in
/// the heads' order: per feature map, per box shape, per row, per column.
const torch::Tensor& ssd_default_boxes();

/// Ground truth per default box for objects `ltrb` ([n, 4], left, top,
/// right, bottom in [0, 1]) of classes `classes` ([n], >= 1): each box takes
/// the object it overlaps most when that IoU exceeds kSsdMatchIou, and every
/// object gets the box that overlaps it most. Returns the offsets ([8732, 4],
/// zero where unmatched) and the labels ([8732], 0 where unmatched).
std::pair<torch::Tensor, torch::Tensor> ssd_encode(const torch::Tensor& ltrb,
                                                   const torch::Tensor& classes);

/// Boxes (cx, cy, w, h) from offsets ([..., 8732, 4]) against the default boxes.
torch::Tensor ssd_decode(const torch::Tensor& offsets);

/// A colour per class ([classes, channels], unit Gaussian) drawn from
/// `seed`: the detection tasks' synthetic streams (ssd300's, maskrcnn's)
/// paint each object in its class's.
torch::Tensor class_colours(int64_t classes, int64_t channels, uint64_t seed);

/// IoU of boxes `a` and `b` given as (cx, cy, w, h), elementwise ([..., 4]).
torch::Tensor box_iou_cxcywh(const torch::Tensor& a, const torch::Tensor& b);

}  // namespace dlscale::models
