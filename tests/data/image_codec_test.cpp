#include "data/image_codec.h"

#include <gtest/gtest.h>
#include <png.h>

// clang-format off
#include <cstdio>
#include <jpeglib.h>
// clang-format on

#include <cstdlib>

#include "core/error.h"
#include "data/data_test_util.h"

namespace dlscale::data {
namespace {

using dlscale::testing::contains;
using dlscale::testing::error_message;

/// A deterministic image: a smooth ramp (JPEG-friendly) or a busy pattern.
Image make_image(int64_t h, int64_t w, int64_t c, bool smooth) {
  Image im;
  im.height = h;
  im.width = w;
  im.channels = c;
  for (int64_t y = 0; y < h; ++y) {
    for (int64_t x = 0; x < w; ++x) {
      for (int64_t k = 0; k < c; ++k) {
        const int64_t v = smooth ? 20 + 3 * x + 2 * y + 20 * k : (x * 37 + y * 11 + k * 5) % 256;
        im.pixels.push_back(static_cast<uint8_t>(v));
      }
    }
  }
  return im;
}

Image decode(const std::vector<uint8_t>& bytes, int channels = 0) {
  return decode_image(bytes.data(), bytes.size(), channels);
}

int max_abs_diff(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  int m = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

TEST(ImageCodec, SniffsMagicBytes) {
  const uint8_t jpeg[] = {0xFF, 0xD8, 0xFF, 0xE0};
  const uint8_t png[] = {0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A};
  EXPECT_EQ(sniff_image_format(jpeg, sizeof(jpeg)), ImageFormat::kJpeg);
  EXPECT_EQ(sniff_image_format(png, sizeof(png)), ImageFormat::kPng);
  EXPECT_EQ(sniff_image_format(png, 7), ImageFormat::kUnknown);
  EXPECT_EQ(sniff_image_format(jpeg, 2), ImageFormat::kUnknown);
  EXPECT_EQ(sniff_image_format(nullptr, 0), ImageFormat::kUnknown);
}

TEST(ImageCodec, PngRoundTripIsExact) {
  for (const int64_t c : {1, 3}) {
    const Image im = make_image(5, 7, c, false);
    const std::vector<uint8_t> png = encode_png(im);
    EXPECT_EQ(sniff_image_format(png.data(), png.size()), ImageFormat::kPng);
    const Image back = decode(png);
    EXPECT_EQ(back.height, 5);
    EXPECT_EQ(back.width, 7);
    EXPECT_EQ(back.channels, c);
    EXPECT_EQ(back.pixels, im.pixels);
    const ImageInfo info = probe_image(png.data(), png.size());
    EXPECT_EQ(info.format, ImageFormat::kPng);
    EXPECT_EQ(info.height, 5);
    EXPECT_EQ(info.width, 7);
    EXPECT_EQ(info.channels, c);
  }
}

TEST(ImageCodec, PngChannelConversions) {
  const Image gray = make_image(4, 6, 1, false);
  const Image rgb = decode(encode_png(gray), 3);
  ASSERT_EQ(rgb.channels, 3);
  for (size_t i = 0; i < gray.pixels.size(); ++i) {
    for (size_t k = 0; k < 3; ++k) EXPECT_EQ(rgb.pixels[i * 3 + k], gray.pixels[i]);
  }
  // RGB with equal components reads back as the same gray level.
  EXPECT_EQ(decode(encode_png(rgb), 1).pixels, gray.pixels);
}

TEST(ImageCodec, PngAlphaIsDroppedNotComposited) {
  const uint8_t rgba[] = {10, 20, 30, 255, 200, 100, 50, 128, 7, 8, 9, 0};
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  image.width = 3;
  image.height = 1;
  image.format = PNG_FORMAT_RGBA;
  png_alloc_size_t size = 1 << 16;
  std::vector<uint8_t> png(size);
  ASSERT_NE(png_image_write_to_memory(&image, png.data(), &size, 0, rgba, 0, nullptr), 0);
  png.resize(size);
  const Image back = decode(png);
  EXPECT_EQ(back.channels, 3);
  EXPECT_EQ(back.pixels, (std::vector<uint8_t>{10, 20, 30, 200, 100, 50, 7, 8, 9}));
}

TEST(ImageCodec, JpegRoundTripIsClose) {
  for (const int64_t c : {1, 3}) {
    const Image im = make_image(24, 32, c, true);
    const std::vector<uint8_t> jpeg = encode_jpeg(im, 95);
    EXPECT_EQ(sniff_image_format(jpeg.data(), jpeg.size()), ImageFormat::kJpeg);
    const Image back = decode(jpeg);
    EXPECT_EQ(back.height, 24);
    EXPECT_EQ(back.width, 32);
    EXPECT_EQ(back.channels, c);
    ASSERT_EQ(back.pixels.size(), im.pixels.size());
    EXPECT_LE(max_abs_diff(back.pixels, im.pixels), 4) << "channels " << c;
  }
}

TEST(ImageCodec, GrayJpegToRgbReplicates) {
  const Image gray = make_image(16, 16, 1, true);
  const std::vector<uint8_t> jpeg = encode_jpeg(gray);
  const Image as_gray = decode(jpeg, 1);
  const Image as_rgb = decode(jpeg, 3);
  ASSERT_EQ(as_rgb.pixels.size(), as_gray.pixels.size() * 3);
  for (size_t i = 0; i < as_gray.pixels.size(); ++i) {
    for (size_t k = 0; k < 3; ++k) EXPECT_EQ(as_rgb.pixels[i * 3 + k], as_gray.pixels[i]);
  }
  EXPECT_EQ(probe_image(jpeg.data(), jpeg.size()).channels, 1);
}

TEST(ImageCodec, RgbJpegToGray) {
  const Image rgb = make_image(16, 16, 3, true);
  const Image gray = decode(encode_jpeg(rgb, 95), 1);
  EXPECT_EQ(gray.channels, 1);
  std::vector<uint8_t> luma;  // ITU-R BT.601, as JPEG's Y
  for (size_t i = 0; i < rgb.pixels.size(); i += 3) {
    luma.push_back(static_cast<uint8_t>(0.299 * rgb.pixels[i] + 0.587 * rgb.pixels[i + 1] +
                                        0.114 * rgb.pixels[i + 2] + 0.5));
  }
  ASSERT_EQ(gray.pixels.size(), luma.size());
  EXPECT_LE(max_abs_diff(gray.pixels, luma), 3);
}

/// A 2x2 CMYK JPEG (libjpeg writes the Adobe marker: inverted CMYK).
std::vector<uint8_t> cmyk_jpeg(const uint8_t (&px)[16]) {
  jpeg_compress_struct cinfo{};
  jpeg_error_mgr err{};
  cinfo.err = jpeg_std_error(&err);
  jpeg_create_compress(&cinfo);
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&cinfo, &buf, &size);
  cinfo.image_width = 2;
  cinfo.image_height = 2;
  cinfo.input_components = 4;
  cinfo.in_color_space = JCS_CMYK;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, 100, TRUE);
  jpeg_start_compress(&cinfo, TRUE);
  for (int y = 0; y < 2; ++y) {
    JSAMPROW row = const_cast<uint8_t*>(px + y * 8);
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  std::vector<uint8_t> out(buf, buf + size);
  jpeg_destroy_compress(&cinfo);
  std::free(buf);
  return out;
}

TEST(ImageCodec, CmykJpegBecomesRgb) {
  // Inverted CMYK: 255 is no ink. All pixels white, then all black (K full).
  const uint8_t white[16] = {255, 255, 255, 255, 255, 255, 255, 255,
                             255, 255, 255, 255, 255, 255, 255, 255};
  const uint8_t black[16] = {255, 255, 255, 0, 255, 255, 255, 0,
                             255, 255, 255, 0, 255, 255, 255, 0};
  const Image w = decode(cmyk_jpeg(white));
  EXPECT_EQ(w.channels, 3);
  EXPECT_EQ(w.pixels.size(), 12u);
  EXPECT_LE(max_abs_diff(w.pixels, std::vector<uint8_t>(12, 255)), 2);
  const Image b = decode(cmyk_jpeg(black), 1);
  EXPECT_EQ(b.channels, 1);
  EXPECT_LE(max_abs_diff(b.pixels, std::vector<uint8_t>(4, 0)), 2);
}

TEST(ImageCodec, CorruptDataThrows) {
  const std::vector<uint8_t> jpeg = encode_jpeg(make_image(32, 32, 3, false));
  const std::vector<uint8_t> png = encode_png(make_image(32, 32, 3, false));
  std::vector<uint8_t> half(jpeg.begin(), jpeg.begin() + static_cast<long>(jpeg.size() / 2));
  EXPECT_TRUE(contains(error_message([&] { decode(half); }), "corrupt JPEG: "));
  half.assign(png.begin(), png.begin() + static_cast<long>(png.size() / 2));
  EXPECT_TRUE(contains(error_message([&] { decode(half); }), "corrupt PNG: "));
  std::vector<uint8_t> bad = png;
  bad[20] ^= 0x01;  // inside IHDR: its CRC no longer matches
  EXPECT_TRUE(contains(error_message([&] { decode(bad); }), "corrupt PNG: "));
  EXPECT_EQ(error_message([] {
              decode({'G', 'I', 'F', '8', '9', 'a'});
            }),
            "not a JPEG or PNG image");
  EXPECT_EQ(error_message([] { decode({}); }), "not a JPEG or PNG image");
  EXPECT_TRUE(contains(error_message([] { decode({0xFF, 0xD8, 0xFF}); }), "corrupt JPEG: "));
  EXPECT_TRUE(contains(error_message([&] { decode(png, 2); }), "channels must be 0"));
}

// Every prefix and every single-byte change of a small file either decodes
// or throws dlscale::Error; nothing crashes or prints. A prefix that lacks
// only the end of the file (PNG's IEND chunk, 12 bytes) may still decode,
// but only to the whole image.
TEST(ImageCodec, EveryTruncationAndByteFlipIsSafe) {
  for (const auto& bytes :
       {encode_jpeg(make_image(9, 11, 3, false)), encode_png(make_image(9, 11, 3, false))}) {
    const Image whole = decode(bytes);
    for (size_t n = 0; n < bytes.size(); ++n) {
      const std::vector<uint8_t> prefix(bytes.begin(), bytes.begin() + static_cast<long>(n));
      if (n + 12 < bytes.size()) {
        EXPECT_THROW(decode(prefix), Error) << "prefix of " << n << " bytes";
        continue;
      }
      try {
        EXPECT_EQ(decode(prefix).pixels, whole.pixels) << "prefix of " << n << " bytes";
      } catch (const Error&) {
      }
    }
    for (size_t i = 0; i < bytes.size(); ++i) {
      std::vector<uint8_t> flipped = bytes;
      flipped[i] ^= 0x5A;
      try {
        const Image im = decode(flipped);
        EXPECT_EQ(im.pixels.size(), static_cast<size_t>(im.height * im.width * im.channels));
      } catch (const Error&) {
      }
    }
  }
}

/// PNG's chunk CRC (the zlib CRC-32), bit by bit.
uint32_t png_crc(const uint8_t* p, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0xEDB88320u : c >> 1;
  }
  return ~c;
}

/// Rewrites a PNG's IHDR width and its CRC.
std::vector<uint8_t> png_with_width(std::vector<uint8_t> png, uint32_t width) {
  for (int i = 0; i < 4; ++i) png[16 + i] = static_cast<uint8_t>(width >> (24 - 8 * i));
  const uint32_t crc = png_crc(png.data() + 12, 17);
  for (int i = 0; i < 4; ++i) png[29 + i] = static_cast<uint8_t>(crc >> (24 - 8 * i));
  return png;
}

TEST(ImageCodec, RefusesHugeImagesBeforeDecoding) {
  const std::vector<uint8_t> png = png_with_width(encode_png(make_image(2, 2, 1, false)), 16385);
  EXPECT_EQ(probe_image(png.data(), png.size()).width, 16385);
  EXPECT_EQ(error_message([&] { decode(png); }),
            "image is 16385x2 pixels; the limit is 16384 per side and 268435456 pixels in all");
  // The JPEG's SOF0 marker (FF C0) holds height then width, big-endian.
  std::vector<uint8_t> jpeg = encode_jpeg(make_image(8, 8, 3, true));
  size_t sof = 2;
  while (sof + 1 < jpeg.size() && !(jpeg[sof] == 0xFF && jpeg[sof + 1] == 0xC0)) ++sof;
  ASSERT_LT(sof + 9, jpeg.size());
  jpeg[sof + 5] = 0x4E;  // height 20000 = 0x4E20
  jpeg[sof + 6] = 0x20;
  EXPECT_EQ(error_message([&] { decode(jpeg); }),
            "image is 8x20000 pixels; the limit is 16384 per side and 268435456 pixels in all");
}

TEST(ImageCodec, EncodeRejectsBadImages) {
  Image im = make_image(2, 2, 3, false);
  im.pixels.pop_back();
  EXPECT_TRUE(contains(error_message([&] { encode_png(im); }), "holds 11 bytes of pixels"));
  im = make_image(2, 2, 2, false);
  EXPECT_TRUE(contains(error_message([&] { encode_jpeg(im); }), "with 2 channels"));
  EXPECT_TRUE(contains(error_message([] { encode_jpeg(Image{}); }), "cannot encode"));
  EXPECT_TRUE(contains(error_message([] { encode_jpeg(make_image(2, 2, 1, false), 0); }),
                       "JPEG quality must be 1 to 100, got 0"));
}

}  // namespace
}  // namespace dlscale::data
