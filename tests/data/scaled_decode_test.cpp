// Reduced JPEG decoding (docs/data.md, "Reduced decoding"): the scales
// libjpeg-turbo gives, the choice of scale per crop, the documented
// tolerance against a full decode plus resize, and the crop's part decoded
// alone giving the pixels of a whole decode.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "data/data_test_util.h"
#include "data/image_codec.h"
#include "data/transforms.h"

namespace dlscale::data {
namespace {

using testing::contains;
using testing::error_message;

/// A photo-like width x height RGB image: smooth gradients and waves, plus
/// a fine texture (a deterministic +-8 per pixel), JPEG-encoded at quality 90.
std::vector<uint8_t> photo(int64_t width, int64_t height) {
  Image img;
  img.width = width;
  img.height = height;
  img.channels = 3;
  uint64_t state = 42;
  const auto texture = [&state] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<double>(state >> 60) - 8.0;  // -8 .. 7
  };
  const auto level = [](double v) { return static_cast<uint8_t>(std::clamp(v, 0.0, 255.0)); };
  for (int64_t y = 0; y < height; ++y) {
    for (int64_t x = 0; x < width; ++x) {
      const double u = static_cast<double>(x) / width, v = static_cast<double>(y) / height;
      img.pixels.push_back(level(128 + 100 * std::sin(6 * u + 2 * v) + texture()));
      img.pixels.push_back(level(40 + 180 * u * v + texture()));
      img.pixels.push_back(level(128 + 90 * std::cos(9 * v - 3 * u) + texture()));
    }
  }
  return encode_jpeg(img, 90);
}

TEST(ScaledDecode, JpegScalesAreCeilOfTheSidesAndPngIsWhole) {
  const std::vector<uint8_t> jpeg = photo(100, 75);
  const std::vector<std::tuple<int, int64_t, int64_t>> scales = {{1, 100, 75}, {2, 50, 38}, {4, 25, 19}, {8, 13, 10}};
  for (const auto& [d, w, h] : scales) {
    const Image img = decode_image_part(jpeg.data(), jpeg.size(), 3, [d = d](int64_t, int64_t) {
                        return DecodeRequest{d};
                      }).image;
    EXPECT_EQ(img.width, w) << d;
    EXPECT_EQ(img.height, h) << d;
    EXPECT_EQ(img.pixels.size(), static_cast<size_t>(w * h * 3)) << d;
  }
  Image small;
  small.width = small.height = 16;
  small.channels = 3;
  small.pixels.assign(16 * 16 * 3, 7);
  const std::vector<uint8_t> png = encode_png(small);
  bool asked = false;
  EXPECT_EQ(decode_image_part(png.data(), png.size(), 3, [&](int64_t, int64_t) {
              asked = true;
              return DecodeRequest{4};
            }).image.width,
            16);
  EXPECT_FALSE(asked);
  int64_t seen_h = 0, seen_w = 0;
  decode_image_part(jpeg.data(), jpeg.size(), 3, [&](int64_t h, int64_t w) {
    seen_h = h;
    seen_w = w;
    return DecodeRequest{};
  });
  EXPECT_EQ(seen_h, 75);
  EXPECT_EQ(seen_w, 100);
  EXPECT_TRUE(contains(error_message([&] {
                         decode_image_part(jpeg.data(), jpeg.size(), 3, [](int64_t, int64_t) { return DecodeRequest{3}; });
                       }),
                       "1/1, 1/2, 1/4 or 1/8 (got 1/3)"));
  EXPECT_TRUE(contains(error_message([&] {
                         decode_image_part(jpeg.data(), jpeg.size(), 3,
                                           [](int64_t, int64_t) { return DecodeRequest{1, 90, 0, 20, 10}; });
                       }),
                       "a decoding region (90, 0) 20x10 is outside the 100x75 image"));
}

TransformOptions options(int64_t size, bool train) {
  TransformOptions o;
  o.size = size;
  o.channels = 3;
  o.train = train;
  o.augment = Augment::kResizedCropFlip;
  o.mean = {0.f, 0.f, 0.f};
  o.std = {1.f, 1.f, 1.f};
  return o;
}

int decode_denominator(int64_t height, int64_t width, const TransformOptions& o, uint64_t seed) {
  return decode_request(height, width, o, seed, /*region=*/false).denominator;
}

TEST(ScaledDecode, TheScaleLeavesTheCropAtLeastTheOutputSize) {
  // Evaluation: the centre square (the shorter side) must stay >= size.
  EXPECT_EQ(decode_denominator(375, 500, options(224, false), 1), 1);  // 375 / 2 < 224
  EXPECT_EQ(decode_denominator(1000, 1500, options(224, false), 1), 4);
  EXPECT_EQ(decode_denominator(4000, 3000, options(224, false), 1), 8);
  EXPECT_EQ(decode_denominator(224, 224, options(224, false), 1), 1);
  // Training: the random-resized crop of each seed; whatever the draw, its
  // shorter side / denominator is still >= size.
  int reduced = 0;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    const int d = decode_denominator(1200, 1600, options(224, true), seed);
    EXPECT_TRUE(d == 1 || d == 2 || d == 4) << seed << ": " << d;
    reduced += d > 1;
  }
  EXPECT_GT(reduced, 50);
  EXPECT_LT(reduced, 200);
}

/// Mean and largest |difference| of two transformed outputs, in 0..255 levels.
std::pair<double, double> difference(const std::vector<float>& a, const std::vector<float>& b) {
  double sum = 0, most = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::abs(a[i] - b[i]) * 255.0;
    sum += d;
    most = std::max(most, d);
  }
  return {sum / static_cast<double>(a.size()), most};
}

// The documented tolerance (docs/data.md): against decoding the whole JPEG
// and resizing, a reduced decode of a photo-like image differs by at most 2
// levels of 255 on average and 16 at any pixel, for the centre crop and every
// random-resized crop (measured: 1.6 and 11 at worst over these 41 crops).
TEST(ScaledDecode, WithinTheToleranceOfAFullDecodeAndResize) {
  const std::vector<uint8_t> jpeg = photo(1024, 768);
  const Image full = decode_image(jpeg.data(), jpeg.size(), 3);
  int compared = 0;
  for (const bool train : {false, true}) {
    const TransformOptions o = options(112, train);
    for (uint64_t seed = 0; seed < (train ? 40u : 1u); ++seed) {
      const int d = decode_denominator(768, 1024, o, seed);
      if (d == 1) continue;
      const DecodedPart reduced =
          decode_image_part(jpeg.data(), jpeg.size(), 3, [d = d](int64_t, int64_t) { return DecodeRequest{d}; });
      std::vector<float> a(3 * 112 * 112), b(a.size());
      const OutputLayout layout = OutputLayout::chw(3, 112);
      transform_image(full, o, seed, a.data(), layout);
      transform_image(reduced.image, o, seed, b.data(), layout, reduced.placement);
      const auto [mean, most] = difference(a, b);
      EXPECT_LE(mean, 2.0) << "train " << train << " seed " << seed << " 1/" << d;
      EXPECT_LE(most, 16.0) << "train " << train << " seed " << seed << " 1/" << d;
      ++compared;
    }
  }
  EXPECT_GT(compared, 10);
}

// Decoding only the crop's part (with its margin) gives the very pixels of
// those rows and columns of a whole decode at the same scale, so the
// transform's output is identical: colour (4:2:0 chroma, the encoder's
// default) and gray, RGB and one-channel output, every scale.
TEST(RegionDecode, GivesThePixelsOfAWholeDecodeAtTheSameScale) {
  const std::vector<uint8_t> colour = photo(500, 375);
  Image gray_image = decode_image(colour.data(), colour.size(), 1);
  const std::vector<uint8_t> gray = encode_jpeg(gray_image, 90);
  int parts = 0, scaled = 0;
  for (const auto* jpeg : {&colour, &gray}) {
    for (const int channels : {3, 1}) {
      for (const int64_t size : {224, 112, 32}) {
        TransformOptions o = options(size, true);
        o.channels = channels;
        o.mean.resize(static_cast<size_t>(channels), 0.f);
        o.std.resize(static_cast<size_t>(channels), 1.f);
        for (uint64_t seed = 0; seed < 25; ++seed) {
          DecodeRequest asked;
          const DecodedPart part = decode_image_part(jpeg->data(), jpeg->size(), channels, [&](int64_t h, int64_t w) {
            return asked = decode_request(h, w, o, seed, /*region=*/true);
          });
          const DecodedPart whole = decode_image_part(jpeg->data(), jpeg->size(), channels, [&](int64_t, int64_t) {
            return DecodeRequest{asked.denominator};
          });
          const Placement& p = part.placement;
          ASSERT_EQ(p.full_width, whole.image.width);
          ASSERT_EQ(p.full_height, whole.image.height);
          ASSERT_LE(p.left + part.image.width, whole.image.width);
          ASSERT_LE(p.top + part.image.height, whole.image.height);
          const auto row = static_cast<size_t>(part.image.width * channels);
          for (int64_t y = 0; y < part.image.height; ++y) {
            const auto* got = &part.image.pixels[static_cast<size_t>(y) * row];
            const auto* want = &whole.image.pixels[static_cast<size_t>(((p.top + y) * whole.image.width + p.left) * channels)];
            ASSERT_TRUE(std::equal(got, got + row, want)) << "seed " << seed << " row " << y;
          }
          std::vector<float> a(static_cast<size_t>(channels * size * size)), b(a.size());
          const OutputLayout layout = OutputLayout::chw(channels, size);
          transform_image(whole.image, o, seed, a.data(), layout, whole.placement);
          transform_image(part.image, o, seed, b.data(), layout, p);
          ASSERT_EQ(a, b) << "seed " << seed << " size " << size;
          parts += part.image.width * part.image.height < whole.image.width * whole.image.height;
          scaled += asked.denominator > 1;
        }
      }
    }
  }
  EXPECT_GT(parts, 250);  // of 300: most crops leave out part of the image
  EXPECT_GT(scaled, 50);
}

}  // namespace
}  // namespace dlscale::data
