#pragma once
// What Mask R-CNN (maskrcnn.cpp, issue 46) and its task (maskrcnn_task.cpp)
// share: the ground truth's tensor names and the input's shape. The model
// reads the ground truth as inputs, as torchvision's does: its losses
// compare the proposals it makes itself with the objects, so no target
// outside the network could hold them.
#include <cstdint>
#include <memory>

#include "libtorch/models/task.h"

namespace dlscale::models {

inline constexpr const char* kGtBoxes = "gt_boxes";  ///< [batch, K, 4] float pixels; unused slots 0
inline constexpr const char* kGtClasses = "gt_classes";  ///< [batch, K] int64; 0: the slot is empty
inline constexpr const char* kGtMasks = "gt_masks";      ///< [batch, K, H, W] float 0 or 1
/// Object slots per image of the synthetic stream (K).
inline constexpr int64_t kMaskRcnnSlots = 3;
/// The reference's input: 800 x 1333 (--image-size 800).
inline constexpr int64_t kMaskRcnnHeight = 800;
inline constexpr int64_t kMaskRcnnWidth = 1333;
/// RoIs sampled per image for the box head (--rois): the reference's 512.
inline constexpr int64_t kMaskRcnnRois = 512;
/// Images a backbone, FPN and RPN pass takes together (--backbone-batch):
/// the reference's 2 images a GPU.
inline constexpr int64_t kMaskRcnnBackboneBatch = 2;

/// An input's width for its height (--image-size): the reference's aspect,
/// round(height x 1333 / 800).
inline int64_t maskrcnn_width(int64_t height) {
  return (height * kMaskRcnnWidth + kMaskRcnnHeight / 2) / kMaskRcnnHeight;
}

/// Instance segmentation (maskrcnn): an image and its objects' boxes,
/// classes and masks in; per image the five losses (RPN objectness and box,
/// RoI class and box, mask) out in training, the metrics' parts in
/// evaluation; matched-RoI class accuracy, box IoU and mask pixel
/// accuracy; throughput in images.
std::shared_ptr<const Task> instance_segmentation();

}  // namespace dlscale::models
