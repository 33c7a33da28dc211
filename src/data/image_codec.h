#pragma once
// JPEG (libjpeg-turbo) and PNG (libpng) decoding and encoding to 8-bit
// pixels in memory. Corrupt data throws dlscale::Error; nothing here exits
// or prints. Messages never name a file: callers prefix it.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace dlscale::data {

/// 8-bit pixels, HWC, row-major: pixels[(y * width + x) * channels + c].
struct Image {
  int64_t height = 0;
  int64_t width = 0;
  int64_t channels = 0;  ///< 1 (grayscale) or 3 (RGB)
  std::vector<uint8_t> pixels;
};

enum class ImageFormat { kJpeg, kPng, kUnknown };

/// Largest width or height decode_image accepts.
inline constexpr int64_t kMaxImageSide = 16384;
/// Largest width * height decode_image accepts (2^28).
inline constexpr int64_t kMaxImagePixels = int64_t{1} << 28;

/// The format `data` starts with, by its magic bytes (FF D8 FF for JPEG, the
/// 8-byte PNG signature); kUnknown for anything else, including short input.
ImageFormat sniff_image_format(const uint8_t* data, size_t size);

/// What an image's header says, read without decoding its pixels.
struct ImageInfo {
  ImageFormat format = ImageFormat::kUnknown;
  int64_t height = 0;
  int64_t width = 0;
  int64_t channels = 0;  ///< as stored: 1 for grayscale, else 3 (alpha not counted)
};

/// Reads a JPEG or PNG header. Throws dlscale::Error like decode_image for
/// unknown or corrupt headers; does not apply the size limits.
ImageInfo probe_image(const uint8_t* data, size_t size);

/// Decodes a JPEG or PNG to `channels`: 1 = grayscale, 3 = RGB, 0 = as
/// stored (1 for grayscale, else 3). Alpha is dropped (not composited);
/// CMYK JPEGs are converted to RGB. Images wider or taller than
/// kMaxImageSide or with more than kMaxImagePixels pixels are refused
/// before their pixels are allocated. Throws dlscale::Error "corrupt JPEG:
/// <why>", "corrupt PNG: <why>", "not a JPEG or PNG image", or naming the
/// bad size or channel count. Thread-safe (no shared state).
Image decode_image(const uint8_t* data, size_t size, int channels = 0);

/// What to decode of an image, chosen once its stored size is known: the
/// scale 1/denominator (1, 2, 4 or 8) and the rectangle of the stored image
/// that will be used, in stored pixels (width 0: all of it).
struct DecodeRequest {
  int denominator = 1;
  double x0 = 0, y0 = 0, width = 0, height = 0;
};
/// Given a JPEG's stored height and width (from its header), what to decode.
using DecodePlan = std::function<DecodeRequest(int64_t height, int64_t width)>;

/// Where a decoded image lies in the image as stored: it holds rows
/// [top, top + its height) and columns [left, left + its width) of the
/// stored image decoded at full_height x full_width. All zero: it is the
/// stored image, whole and at full scale.
struct Placement {
  int64_t stored_height = 0, stored_width = 0;
  int64_t full_height = 0, full_width = 0;
  int64_t top = 0, left = 0;
};

struct DecodedPart {
  Image image;
  Placement placement;
};

/// decode_image, of only what `plan` asks for, the header read once. A JPEG
/// is decoded straight to the scale by libjpeg-turbo's DCT scaling (each
/// side ceil(side / denominator), as PIL's draft mode does), and only the
/// rows and columns that cover the rectangle with a margin of 2 decoded
/// pixels (columns widened to the JPEG's block boundaries): rows above it are
/// skipped (entropy-decoded only), rows below it are never decoded, columns
/// outside it are not inverse-transformed. Its pixels are those of the same
/// rows and columns of a decode of the whole image at that scale. A PNG is
/// decoded whole at its stored size (`plan` is not called). A denominator
/// other than 1, 2, 4, 8 or a rectangle outside the image throws
/// dlscale::Error.
DecodedPart decode_image_part(const uint8_t* data, size_t size, int channels, const DecodePlan& plan);

/// Encodes a 1- or 3-channel image as baseline JPEG; `quality` 1..100.
/// Throws dlscale::Error for an empty or inconsistent image or bad quality.
std::vector<uint8_t> encode_jpeg(const Image& image, int quality = 90);

/// Encodes a 1- or 3-channel image as 8-bit PNG (lossless: decode_image
/// returns the same pixels). Throws dlscale::Error like encode_jpeg.
std::vector<uint8_t> encode_png(const Image& image);

}  // namespace dlscale::data
