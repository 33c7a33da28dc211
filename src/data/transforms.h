#pragma once
// Per-sample transforms of the input pipeline (docs/data.md, "Transforms"):
// decoded HWC uint8 image in, normalised CHW float32 out. Torch-free, so the
// pipeline's threads never touch LibTorch's intra-op pool.
#include <cstdint>
#include <string>
#include <vector>

#include "data/image_codec.h"

namespace dlscale::data {

/// Training-time augmentation.
enum class Augment {
  kNone,             ///< resize to the target size only
  kFlip,             ///< + random horizontal flip
  kCropFlip,         ///< + random crop of the padded image (CIFAR/MNIST recipes)
  kResizedCropFlip,  ///< random-resized crop (scale 0.08–1, ratio 3/4–4/3) + flip (ImageNet)
};
/// "none" | "flip" | "crop-flip" | "rrc-flip"; throws dlscale::Error otherwise.
Augment parse_augment(const std::string& name);
std::string to_string(Augment augment);

struct TransformOptions {
  int64_t size = 0;       ///< output height = width
  int64_t channels = 0;   ///< output channels (1 or 3); input converted if it differs
  bool train = true;      ///< false: evaluation transform (resize, centre crop), no randomness
  Augment augment = Augment::kNone;
  int64_t pad = 4;        ///< padding of kCropFlip, in pixels (zero-filled)
  std::vector<float> mean;  ///< per channel, pixel units in [0, 1]
  std::vector<float> std;
};

/// Element strides of the output (in floats): CHW is {size², size, 1}; NHWC
/// (channels-last) is {1, size·channels, channels}.
struct OutputLayout {
  int64_t channel = 0;
  int64_t row = 0;
  int64_t column = 0;
  static OutputLayout chw(int64_t /*channels*/, int64_t size) { return {size * size, size, 1}; }
  static OutputLayout hwc(int64_t channels, int64_t size) { return {1, size * channels, channels}; }
};

/// Writes channels × size × size floats to `out`: ((pixel / 255) − mean) / std
/// after the geometric transform. Random choices come from `seed` alone, so a
/// sample's augmentation does not depend on which worker or thread makes it.
/// Eval (and kNone): an image of the target size is unchanged; otherwise its
/// shorter side is resized to `size` (bilinear) and the centre cropped.
/// An image decoded in part or at a reduced scale (decode_request,
/// decode_image_part) passes its `placement`: the random choices are made on
/// the stored size, as for the full image, and mapped to the decoded
/// pixels. Only the random-resized crop takes a part of an image; the other
/// transforms need it whole (at any scale).
void transform_image(const Image& image, const TransformOptions& options, uint64_t seed,
                     float* out, const OutputLayout& layout, const Placement& placement = {});

/// What transform_image(options, seed) needs decoded of a JPEG stored at
/// `height` x `width`: the largest scale 1/1, 1/2, 1/4 or 1/8 that leaves the
/// region it resamples (the random-resized crop, or the centre square) at
/// least options.size pixels on its shorter side, and with `region` (and a
/// random-resized crop) only that crop.
DecodeRequest decode_request(int64_t height, int64_t width, const TransformOptions& options, uint64_t seed,
                             bool region);

/// Bilinear resize of the region (x0, y0, w, h) of `image` to out_h × out_w.
Image resize_region(const Image& image, double x0, double y0, double w, double h, int64_t out_h,
                    int64_t out_w);

}  // namespace dlscale::data
