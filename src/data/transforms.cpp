#include "data/transforms.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "data/sampler.h"

namespace dlscale::data {

namespace {

/// Uniform doubles in [0, 1) from splitmix64 of a seed.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  double uniform() {
    state_ = mix_seed(state_, 0x5bd1e995u);
    return static_cast<double>(state_ >> 11) * 0x1.0p-53;
  }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }

 private:
  uint64_t state_;
};

struct Region {
  double x0, y0, w, h;
};

/// torchvision's RandomResizedCrop.get_params on a height x width image: 10
/// tries, then the centre crop of the largest in-ratio region.
Region random_resized_region(int64_t height, int64_t width, Rng& rng) {
  const double area = static_cast<double>(height * width);
  const double log_lo = std::log(3.0 / 4.0), log_hi = std::log(4.0 / 3.0);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * rng.uniform(0.08, 1.0);
    const double ratio = std::exp(rng.uniform(log_lo, log_hi));
    const double w = std::round(std::sqrt(target * ratio));
    const double h = std::round(std::sqrt(target / ratio));
    if (w > 0 && h > 0 && w <= width && h <= height) {
      const double y0 = std::floor(rng.uniform() * (height - h + 1));
      const double x0 = std::floor(rng.uniform() * (width - w + 1));
      return {x0, y0, w, h};
    }
  }
  const double side = static_cast<double>(std::min(height, width));
  return {(width - side) / 2, (height - side) / 2, side, side};
}

/// The evaluation geometry: shorter side to `size`, centre crop (callers
/// skip it for an image already size × size rather than copy it).
Image resize_center(const Image& img, int64_t size) {
  const double side = static_cast<double>(std::min(img.height, img.width));
  return resize_region(img, (img.width - side) / 2, (img.height - side) / 2, side, side, size, size);
}

/// Writes `img` (already size × size) normalised in `layout`, flipped if asked, with
/// the crop offset (dx, dy) applied to a zero-padded view.
void write_out(const Image& img, const TransformOptions& o, bool flip, int64_t dx, int64_t dy,
               float* out, const OutputLayout& layout) {
  const int64_t s = o.size;
  for (int64_t c = 0; c < o.channels; ++c) {
    const float scale = 1.0f / (255.0f * o.std[static_cast<size_t>(c)]);
    const float shift = o.mean[static_cast<size_t>(c)] / o.std[static_cast<size_t>(c)];
    const int64_t src_c = img.channels == o.channels ? c : 0;
    float* plane = out + c * layout.channel;
    for (int64_t y = 0; y < s; ++y) {
      const int64_t sy = y + dy;
      for (int64_t x = 0; x < s; ++x) {
        const int64_t sx = (flip ? s - 1 - x : x) + dx;
        float v = 0;
        if (sy >= 0 && sy < s && sx >= 0 && sx < s) {
          const uint8_t* px = &img.pixels[static_cast<size_t>((sy * s + sx) * img.channels)];
          v = (o.channels == 1 && img.channels == 3)
                  ? 0.299f * px[0] + 0.587f * px[1] + 0.114f * px[2]
                  : static_cast<float>(px[src_c]);
        }
        plane[y * layout.row + x * layout.column] = v * scale - shift;
      }
    }
  }
}

}  // namespace

Augment parse_augment(const std::string& name) {
  if (name == "none") return Augment::kNone;
  if (name == "flip") return Augment::kFlip;
  if (name == "crop-flip") return Augment::kCropFlip;
  if (name == "rrc-flip") return Augment::kResizedCropFlip;
  throw Error(fmt::format("unknown augmentation '{}' (allowed: none, flip, crop-flip, rrc-flip)",
                          name));
}

std::string to_string(Augment a) {
  switch (a) {
    case Augment::kNone: return "none";
    case Augment::kFlip: return "flip";
    case Augment::kCropFlip: return "crop-flip";
    case Augment::kResizedCropFlip: return "rrc-flip";
  }
  return "none";
}

Image resize_region(const Image& img, double x0, double y0, double w, double h, int64_t out_h,
                    int64_t out_w) {
  // Bilinear in 11-bit fixed point, as PIL and OpenCV do: the column tables
  // are computed once per call and the row weights once per row, so the
  // inner loop is integer multiply-adds (4x faster than blending doubles).
  constexpr int kBits = 11;
  constexpr int32_t kOne = 1 << kBits;
  Image out;
  out.height = out_h;
  out.width = out_w;
  out.channels = img.channels;
  out.pixels.resize(static_cast<size_t>(out_h * out_w * img.channels));
  const double sy = h / static_cast<double>(out_h), sx = w / static_cast<double>(out_w);
  const int64_t c = img.channels;
  auto split = [](double f, int64_t& lo) {  // f = lo + weight / kOne
    lo = static_cast<int64_t>(f);
    return static_cast<int32_t>(std::lround((f - static_cast<double>(lo)) * kOne));
  };
  std::vector<int64_t> x_lo(static_cast<size_t>(out_w)), x_hi(x_lo.size());
  std::vector<int32_t> x_w(x_lo.size());
  for (int64_t x = 0; x < out_w; ++x) {
    const double fx = std::clamp(x0 + (x + 0.5) * sx - 0.5, 0.0, static_cast<double>(img.width - 1));
    int64_t lo = 0;
    x_w[static_cast<size_t>(x)] = split(fx, lo);
    x_lo[static_cast<size_t>(x)] = lo * c;
    x_hi[static_cast<size_t>(x)] = std::min(lo + 1, img.width - 1) * c;
  }
  const int64_t stride = img.width * c;
  for (int64_t y = 0; y < out_h; ++y) {
    const double fy = std::clamp(y0 + (y + 0.5) * sy - 0.5, 0.0, static_cast<double>(img.height - 1));
    int64_t y_lo = 0;
    const int32_t wy1 = split(fy, y_lo), wy0 = kOne - wy1;
    const uint8_t* r0 = img.pixels.data() + y_lo * stride;
    const uint8_t* r1 = img.pixels.data() + std::min(y_lo + 1, img.height - 1) * stride;
    uint8_t* o = out.pixels.data() + y * out_w * c;
    for (int64_t x = 0; x < out_w; ++x) {
      const int64_t a = x_lo[static_cast<size_t>(x)], b = x_hi[static_cast<size_t>(x)];
      const int32_t w1 = x_w[static_cast<size_t>(x)], w0 = kOne - w1;
      for (int64_t k = 0; k < c; ++k) {
        const int32_t top = r0[a + k] * w0 + r0[b + k] * w1;
        const int32_t bottom = r1[a + k] * w0 + r1[b + k] * w1;
        o[x * c + k] = static_cast<uint8_t>((top * wy0 + bottom * wy1 + (1 << (2 * kBits - 1))) >> (2 * kBits));
      }
    }
  }
  return out;
}

DecodeRequest decode_request(int64_t height, int64_t width, const TransformOptions& o, uint64_t seed,
                             bool region) {
  Rng rng(seed);
  const Augment a = o.train ? o.augment : Augment::kNone;
  DecodeRequest request;
  double side = static_cast<double>(std::min(height, width));
  if (a == Augment::kResizedCropFlip) {
    const Region r = random_resized_region(height, width, rng);
    side = std::min(r.w, r.h);
    if (region) request = {1, r.x0, r.y0, r.w, r.h};
  }
  while (request.denominator < 8 && side / (2 * request.denominator) >= static_cast<double>(o.size)) {
    request.denominator *= 2;
  }
  return request;
}

void transform_image(const Image& image, const TransformOptions& o, uint64_t seed, float* out,
                     const OutputLayout& layout, const Placement& placement) {
  DLSCALE_ASSERT(o.size >= 1 && (o.channels == 1 || o.channels == 3));
  DLSCALE_ASSERT(o.mean.size() == static_cast<size_t>(o.channels) && o.std.size() == o.mean.size());
  DLSCALE_CHECK(image.height >= 1 && image.width >= 1, "an image has no pixels");
  Rng rng(seed);
  const Augment a = o.train ? o.augment : Augment::kNone;
  const bool placed = placement.stored_height > 0;
  if (a == Augment::kResizedCropFlip) {
    // The region is drawn on the stored size, then mapped to the decoded
    // pixels (a scale, and the offset of a part): a reduced decode makes the
    // same choices as a full one.
    const int64_t sh = placed ? placement.stored_height : image.height;
    const int64_t sw = placed ? placement.stored_width : image.width;
    const Region r = random_resized_region(sh, sw, rng);
    const double fy = placed ? static_cast<double>(placement.full_height) / static_cast<double>(sh) : 1.0;
    const double fx = placed ? static_cast<double>(placement.full_width) / static_cast<double>(sw) : 1.0;
    const double top = static_cast<double>(placement.top), left = static_cast<double>(placement.left);
    const Image crop = resize_region(image, r.x0 * fx - left, r.y0 * fy - top, r.w * fx, r.h * fy, o.size, o.size);
    write_out(crop, o, rng.uniform() < 0.5, 0, 0, out, layout);
    return;
  }
  DLSCALE_ASSERT(!placed || (placement.top == 0 && placement.left == 0 && placement.full_height == image.height &&
                             placement.full_width == image.width));  // whole, at some scale
  Image resized;
  const bool fits = image.height == o.size && image.width == o.size;
  if (!fits) resized = resize_center(image, o.size);
  const Image& sized = fits ? image : resized;
  int64_t dx = 0, dy = 0;
  if (a == Augment::kCropFlip) {
    dx = static_cast<int64_t>(rng.uniform() * static_cast<double>(2 * o.pad + 1)) - o.pad;
    dy = static_cast<int64_t>(rng.uniform() * static_cast<double>(2 * o.pad + 1)) - o.pad;
  }
  const bool flip = a != Augment::kNone && rng.uniform() < 0.5;
  write_out(sized, o, flip, dx, dy, out, layout);
}

}  // namespace dlscale::data
