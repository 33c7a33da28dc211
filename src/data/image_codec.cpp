#include "data/image_codec.h"

// clang-format off
#include <cstdio>  // jpeglib.h needs FILE and size_t first
#include <jpeglib.h>
#include <jerror.h>
// clang-format on
#include <png.h>

#include <algorithm>
#include <cmath>
#include <csetjmp>
#include <cstring>
#include <string>

#include "core/error.h"

namespace dlscale::data {

namespace {

constexpr uint8_t kPngSignature[8] = {0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A};
// A progressive JPEG may hold any number of scans, each a full pass over the
// image: a small file could keep the decoder busy for minutes. TurboJPEG
// refuses more than 500 when asked to; so do we.
constexpr int kMaxJpegScans = 500;
constexpr size_t kJpegOutputChunk = size_t{1} << 16;

void check_channels(int channels) {
  DLSCALE_CHECK(channels == 0 || channels == 1 || channels == 3,
                "image channels must be 0 (as stored), 1 or 3, got {}", channels);
}

void check_decoded_size(int64_t width, int64_t height) {
  DLSCALE_CHECK(width > 0 && height > 0, "image has no pixels ({}x{})", width, height);
  DLSCALE_CHECK(
      width <= kMaxImageSide && height <= kMaxImageSide && width * height <= kMaxImagePixels,
      "image is {}x{} pixels; the limit is {} per side and {} pixels in all", width, height,
      kMaxImageSide, kMaxImagePixels);
}

void check_encodable(const Image& image, int64_t max_side) {
  DLSCALE_CHECK(image.channels == 1 || image.channels == 3,
                "cannot encode an image with {} channels; allowed: 1 or 3", image.channels);
  DLSCALE_CHECK(
      image.width > 0 && image.height > 0 && image.width <= max_side && image.height <= max_side,
      "cannot encode a {}x{} image; each side must be 1 to {}", image.width, image.height,
      max_side);
  const auto want = static_cast<uint64_t>(image.width * image.height * image.channels);
  DLSCALE_CHECK(image.pixels.size() == want, "image holds {} bytes of pixels; {}x{}x{} needs {}",
                image.pixels.size(), image.height, image.width, image.channels, want);
}

// --- libjpeg plumbing ----------------------------------------------------------
// libjpeg reports errors by calling error_exit, which must not return: ours
// longjmps back to the setjmp in the function that called into libjpeg. Those
// functions keep all C++ objects outside their own frame (in the structs
// below, owned by the caller), so the jump skips no destructor.

struct JpegErrors {
  jpeg_error_mgr pub;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

[[noreturn]] void jpeg_fail(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<JpegErrors*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

/// Warnings are not printed. A stream that ends early is an error; other
/// corrupt-data warnings are tolerated, as other decoders tolerate them.
void jpeg_warn(j_common_ptr cinfo, int level) {
  if (level >= 0) return;  // trace messages
  if (cinfo->err->msg_code == JWRN_JPEG_EOF) jpeg_fail(cinfo);
  cinfo->err->num_warnings++;
}

void jpeg_progress(j_common_ptr cinfo) {
  const auto* d = reinterpret_cast<j_decompress_ptr>(cinfo);
  if (d->input_scan_number > kMaxJpegScans) {
    auto* err = reinterpret_cast<JpegErrors*>(cinfo->err);
    std::snprintf(err->message, sizeof(err->message), "more than %d scans", kMaxJpegScans);
    std::longjmp(err->jump, 1);
  }
}

void init_errors(JpegErrors& err) {
  jpeg_std_error(&err.pub);
  err.pub.error_exit = jpeg_fail;
  err.pub.emit_message = jpeg_warn;
  err.message[0] = '\0';
}

/// A decompressor and the buffers its output goes through.
struct JpegDecoder {
  jpeg_decompress_struct cinfo{};
  JpegErrors err{};
  jpeg_progress_mgr progress{};
  bool cmyk = false;         // decoded as CMYK, converted here
  std::vector<uint8_t> row;  // one CMYK row
  JpegDecoder() {
    init_errors(err);
    cinfo.err = &err.pub;
    progress.progress_monitor = jpeg_progress;
  }
  JpegDecoder(const JpegDecoder&) = delete;
  JpegDecoder& operator=(const JpegDecoder&) = delete;
  ~JpegDecoder() { jpeg_destroy_decompress(&cinfo); }  // safe when never created
};

/// Creates the decompressor and reads the header; false on a libjpeg error.
bool jpeg_begin(JpegDecoder& d, const uint8_t* data, size_t size) {
  if (setjmp(d.err.jump)) return false;
  jpeg_create_decompress(&d.cinfo);
  d.cinfo.progress = &d.progress;
  jpeg_mem_src(&d.cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(&d.cinfo, TRUE);
  return true;
}

bool jpeg_is_cmyk(const jpeg_decompress_struct& cinfo) {
  return cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK;
}

/// Converts one row of CMYK to `channels` (1 or 3). Adobe's files store
/// inverted CMYK (255 = no ink).
void cmyk_to_rgb(const uint8_t* in, int64_t width, bool inverted, int64_t channels, uint8_t* out) {
  for (int64_t x = 0; x < width; ++x, in += 4) {
    const int k = inverted ? in[3] : 255 - in[3];
    int rgb[3];
    for (int c = 0; c < 3; ++c) rgb[c] = ((inverted ? in[c] : 255 - in[c]) * k + 127) / 255;
    if (channels == 1) {
      *out++ = static_cast<uint8_t>((77 * rgb[0] + 150 * rgb[1] + 29 * rgb[2] + 128) >> 8);
    } else {
      for (int c = 0; c < 3; ++c) *out++ = static_cast<uint8_t>(rgb[c]);
    }
  }
}

/// The decoded rows and columns wanted: rows [top, bottom), columns
/// [left, right) of the output; all of it when right == 0.
struct JpegWindow {
  JDIMENSION top = 0, bottom = 0, left = 0, right = 0;
};

/// Starts decompressing, narrows the output to `window`'s columns (widened
/// to block boundaries by libjpeg-turbo; `left` and `right` are set to what
/// it gives), skips the rows above it and decodes its rows into `out`
/// (channels set); false on a libjpeg error. A narrowed row's outermost
/// column on a side inside the image is dropped: libjpeg-turbo upsamples
/// its chroma without the neighbour beyond it, so it is not the whole
/// decode's pixel (the window's margin leaves it unused). The pixel buffer
/// grows as rows arrive, so a truncated file that claims a large size fails
/// before all of it is allocated.
bool jpeg_read_rows(JpegDecoder& d, JpegWindow& window, Image& out) {
  if (setjmp(d.err.jump)) return false;
  jpeg_start_decompress(&d.cinfo);
  const int want = d.cmyk ? 4 : static_cast<int>(out.channels);
  if (d.cinfo.output_components != want) {
    std::snprintf(d.err.message, sizeof(d.err.message), "decoder gave %d components, not %d",
                  d.cinfo.output_components, want);
    return false;
  }
  const JDIMENSION full_width = d.cinfo.output_width;
  if (window.right == 0) {
    window = {0, d.cinfo.output_height, 0, full_width};
  } else if (window.left > 0 || window.right < full_width) {
    JDIMENSION width = window.right - window.left;
    jpeg_crop_scanline(&d.cinfo, &window.left, &width);
    window.right = window.left + width;
  }
  if (window.top > 0 && jpeg_skip_scanlines(&d.cinfo, window.top) != window.top) {
    std::snprintf(d.err.message, sizeof(d.err.message), "no data for row %u", d.cinfo.output_scanline);
    return false;
  }
  const JDIMENSION trim_left = window.left > 0 ? 1 : 0, trim_right = window.right < full_width ? 1 : 0;
  window.left += trim_left;
  window.right -= trim_right;
  out.width = window.right - window.left;
  out.height = window.bottom - window.top;
  const auto stride = static_cast<size_t>(out.width * out.channels);
  out.pixels.reserve(std::min<size_t>(stride * static_cast<size_t>(out.height), 16u << 20));
  const bool direct = !d.cmyk && trim_left + trim_right == 0;  // rows straight into `out`
  if (!direct) d.row.resize(static_cast<size_t>(d.cinfo.output_width) * static_cast<size_t>(want));
  while (d.cinfo.output_scanline < window.bottom) {
    const size_t at = static_cast<size_t>(d.cinfo.output_scanline - window.top) * stride;
    out.pixels.resize(at + stride);
    JSAMPROW row = direct ? out.pixels.data() + at : d.row.data();
    if (jpeg_read_scanlines(&d.cinfo, &row, 1) != 1) {
      std::snprintf(d.err.message, sizeof(d.err.message), "no data for row %u",
                    d.cinfo.output_scanline);
      return false;
    }
    const uint8_t* kept = d.row.data() + static_cast<size_t>(trim_left) * static_cast<size_t>(want);
    if (d.cmyk) {
      cmyk_to_rgb(kept, out.width, d.cinfo.saw_Adobe_marker, out.channels, out.pixels.data() + at);
    } else if (!direct) {
      std::memcpy(out.pixels.data() + at, kept, stride);
    }
  }
  // Not jpeg_finish_decompress: every row wanted is in (the rest need not
  // be), and a file that lacks only its end marker is still an image. The
  // destructor releases the decoder.
  return true;
}

[[noreturn]] void throw_corrupt_jpeg(const JpegDecoder& d) {
  throw Error(std::string("corrupt JPEG: ") + d.err.message);
}

ImageInfo probe_jpeg(JpegDecoder& d, const uint8_t* data, size_t size) {
  if (!jpeg_begin(d, data, size)) throw_corrupt_jpeg(d);
  ImageInfo info;
  info.format = ImageFormat::kJpeg;
  info.width = d.cinfo.image_width;
  info.height = d.cinfo.image_height;
  info.channels = d.cinfo.jpeg_color_space == JCS_GRAYSCALE ? 1 : 3;
  return info;
}

/// Sets the output colour space and the scale 1/denominator, and computes
/// the output size; false on a libjpeg error.
bool jpeg_set_output(JpegDecoder& d, J_COLOR_SPACE space, int denominator) {
  if (setjmp(d.err.jump)) return false;
  d.cinfo.out_color_space = space;
  d.cinfo.scale_num = 1;
  d.cinfo.scale_denom = static_cast<unsigned>(denominator);
  jpeg_calc_output_dimensions(&d.cinfo);
  return true;
}

/// The decoded rows and columns that cover `r` (in stored pixels) on an
/// output of out_h x out_w from a stored h x w, with a margin of 2: one for
/// the bilinear resize's neighbours, one for the column jpeg_read_rows
/// drops; the whole output when r asks for all.
JpegWindow jpeg_window(const DecodeRequest& r, int64_t h, int64_t w, JDIMENSION out_h, JDIMENSION out_w) {
  if (r.width <= 0) return {};
  DLSCALE_CHECK(r.x0 >= 0 && r.y0 >= 0 && r.height > 0 && r.x0 + r.width <= static_cast<double>(w) &&
                    r.y0 + r.height <= static_cast<double>(h),
                "a decoding region ({}, {}) {}x{} is outside the {}x{} image", r.x0, r.y0, r.width, r.height, w, h);
  const double fy = static_cast<double>(out_h) / static_cast<double>(h);
  const double fx = static_cast<double>(out_w) / static_cast<double>(w);
  const auto low = [](double v) { return static_cast<JDIMENSION>(std::max(0.0, std::floor(v) - 2)); };
  const auto high = [](double v, JDIMENSION end) {
    return static_cast<JDIMENSION>(std::min(static_cast<double>(end), std::ceil(v) + 2));
  };
  return {low(r.y0 * fy), high((r.y0 + r.height) * fy, out_h), low(r.x0 * fx), high((r.x0 + r.width) * fx, out_w)};
}

DecodedPart decode_jpeg(const uint8_t* data, size_t size, int channels, const DecodePlan& plan) {
  JpegDecoder d;
  const ImageInfo info = probe_jpeg(d, data, size);
  check_decoded_size(info.width, info.height);
  const DecodeRequest request = plan ? plan(info.height, info.width) : DecodeRequest{};
  const int denominator = request.denominator;
  DLSCALE_CHECK(denominator == 1 || denominator == 2 || denominator == 4 || denominator == 8,
                "a decoding scale is 1/1, 1/2, 1/4 or 1/8 (got 1/{})", denominator);
  DecodedPart part;
  Image& out = part.image;
  out.channels = channels == 0 ? info.channels : channels;
  d.cmyk = jpeg_is_cmyk(d.cinfo);
  if (!jpeg_set_output(d, d.cmyk ? JCS_CMYK : out.channels == 1 ? JCS_GRAYSCALE : JCS_RGB, denominator)) {
    throw_corrupt_jpeg(d);
  }
  Placement& p = part.placement;
  p.stored_height = info.height;
  p.stored_width = info.width;
  p.full_height = d.cinfo.output_height;
  p.full_width = d.cinfo.output_width;
  JpegWindow window = jpeg_window(request, info.height, info.width, d.cinfo.output_height, d.cinfo.output_width);
  if (!jpeg_read_rows(d, window, out)) throw_corrupt_jpeg(d);
  p.top = window.top;
  p.left = window.left;
  return part;
}

/// A destination manager appending to a vector (jpeg_mem_dest's buffer
/// cannot be freed safely after an error in the middle of compression).
struct VectorDestination {
  jpeg_destination_mgr pub{};
  std::vector<uint8_t>* out = nullptr;
};

void dest_init(j_compress_ptr cinfo) {
  auto* dest = reinterpret_cast<VectorDestination*>(cinfo->dest);
  dest->out->resize(kJpegOutputChunk);
  dest->pub.next_output_byte = dest->out->data();
  dest->pub.free_in_buffer = dest->out->size();
}

boolean dest_grow(j_compress_ptr cinfo) {
  auto* dest = reinterpret_cast<VectorDestination*>(cinfo->dest);
  const size_t used = dest->out->size();
  bool grown = true;
  try {
    dest->out->resize(used * 2);
  } catch (const std::bad_alloc&) {
    grown = false;
  }
  if (!grown) ERREXIT1(cinfo, JERR_OUT_OF_MEMORY, 0);
  dest->pub.next_output_byte = dest->out->data() + used;
  dest->pub.free_in_buffer = dest->out->size() - used;
  return TRUE;
}

void dest_term(j_compress_ptr cinfo) {
  auto* dest = reinterpret_cast<VectorDestination*>(cinfo->dest);
  dest->out->resize(dest->out->size() - dest->pub.free_in_buffer);
}

struct JpegEncoder {
  jpeg_compress_struct cinfo{};
  JpegErrors err{};
  VectorDestination dest{};
  JpegEncoder() {
    init_errors(err);
    cinfo.err = &err.pub;
    dest.pub.init_destination = dest_init;
    dest.pub.empty_output_buffer = dest_grow;
    dest.pub.term_destination = dest_term;
  }
  JpegEncoder(const JpegEncoder&) = delete;
  JpegEncoder& operator=(const JpegEncoder&) = delete;
  ~JpegEncoder() { jpeg_destroy_compress(&cinfo); }
};

bool jpeg_write(JpegEncoder& e, const Image& image, int quality, std::vector<uint8_t>& out) {
  if (setjmp(e.err.jump)) return false;
  jpeg_create_compress(&e.cinfo);
  e.dest.out = &out;
  e.cinfo.dest = &e.dest.pub;
  e.cinfo.image_width = static_cast<JDIMENSION>(image.width);
  e.cinfo.image_height = static_cast<JDIMENSION>(image.height);
  e.cinfo.input_components = static_cast<int>(image.channels);
  e.cinfo.in_color_space = image.channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&e.cinfo);
  jpeg_set_quality(&e.cinfo, quality, TRUE);
  jpeg_start_compress(&e.cinfo, TRUE);
  const auto stride = static_cast<size_t>(image.width * image.channels);
  while (e.cinfo.next_scanline < e.cinfo.image_height) {
    // libjpeg's row type is not const, but compression only reads it.
    auto* row = const_cast<JSAMPLE*>(image.pixels.data() + e.cinfo.next_scanline * stride);
    jpeg_write_scanlines(&e.cinfo, &row, 1);
  }
  jpeg_finish_compress(&e.cinfo);
  return true;
}

// --- libpng (simplified API: errors come back as return values) ----------------

struct PngImage {
  png_image image{};
  PngImage() { image.version = PNG_IMAGE_VERSION; }
  PngImage(const PngImage&) = delete;
  PngImage& operator=(const PngImage&) = delete;
  ~PngImage() { png_image_free(&image); }
};

ImageInfo probe_png(PngImage& p, const uint8_t* data, size_t size) {
  DLSCALE_CHECK(png_image_begin_read_from_memory(&p.image, data, size) != 0, "corrupt PNG: {}",
                p.image.message);
  ImageInfo info;
  info.format = ImageFormat::kPng;
  info.width = p.image.width;
  info.height = p.image.height;
  info.channels = (p.image.format & PNG_FORMAT_FLAG_COLOR) != 0 ? 3 : 1;
  return info;
}

Image decode_png(const uint8_t* data, size_t size, int channels) {
  PngImage p;
  const ImageInfo info = probe_png(p, data, size);
  check_decoded_size(info.width, info.height);
  // 16-bit samples are scaled to 8 bits as they are (as PIL and TensorFlow
  // do), not taken as linear light. A gAMA chunk is still honoured.
  p.image.flags |= PNG_IMAGE_FLAG_16BIT_sRGB;
  Image out;
  out.width = info.width;
  out.height = info.height;
  out.channels = channels == 0 ? info.channels : channels;
  // Read with the alpha channel when there is one (so nothing is composited
  // onto a background), then drop it.
  const bool alpha = (p.image.format & PNG_FORMAT_FLAG_ALPHA) != 0;
  p.image.format =
      (out.channels == 3 ? PNG_FORMAT_RGB : PNG_FORMAT_GRAY) | (alpha ? PNG_FORMAT_FLAG_ALPHA : 0u);
  const int64_t read_channels = out.channels + (alpha ? 1 : 0);
  out.pixels.resize(static_cast<size_t>(out.width * out.height * read_channels));
  DLSCALE_CHECK(png_image_finish_read(&p.image, nullptr, out.pixels.data(), 0, nullptr) != 0,
                "corrupt PNG: {}", p.image.message);
  if (alpha) {
    const auto n = static_cast<size_t>(out.width * out.height);
    const auto c = static_cast<size_t>(out.channels);
    for (size_t i = 0; i < n; ++i) {
      std::memmove(&out.pixels[i * c], &out.pixels[i * (c + 1)], c);
    }
    out.pixels.resize(n * c);
    out.pixels.shrink_to_fit();
  }
  return out;
}

}  // namespace

ImageFormat sniff_image_format(const uint8_t* data, size_t size) {
  if (size >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF) return ImageFormat::kJpeg;
  if (size >= sizeof(kPngSignature) &&
      std::memcmp(data, kPngSignature, sizeof(kPngSignature)) == 0) {
    return ImageFormat::kPng;
  }
  return ImageFormat::kUnknown;
}

ImageInfo probe_image(const uint8_t* data, size_t size) {
  switch (sniff_image_format(data, size)) {
    case ImageFormat::kJpeg: {
      JpegDecoder d;
      return probe_jpeg(d, data, size);
    }
    case ImageFormat::kPng: {
      PngImage p;
      return probe_png(p, data, size);
    }
    case ImageFormat::kUnknown:
      break;
  }
  throw Error("not a JPEG or PNG image");
}

Image decode_image(const uint8_t* data, size_t size, int channels) {
  return decode_image_part(data, size, channels, nullptr).image;
}

DecodedPart decode_image_part(const uint8_t* data, size_t size, int channels, const DecodePlan& plan) {
  check_channels(channels);
  switch (sniff_image_format(data, size)) {
    case ImageFormat::kJpeg:
      return decode_jpeg(data, size, channels, plan);
    case ImageFormat::kPng: {
      DecodedPart part;
      part.image = decode_png(data, size, channels);
      part.placement = {part.image.height, part.image.width, part.image.height, part.image.width, 0, 0};
      return part;
    }
    case ImageFormat::kUnknown:
      break;
  }
  throw Error("not a JPEG or PNG image");
}

std::vector<uint8_t> encode_jpeg(const Image& image, int quality) {
  check_encodable(image, JPEG_MAX_DIMENSION);
  DLSCALE_CHECK(quality >= 1 && quality <= 100, "JPEG quality must be 1 to 100, got {}", quality);
  std::vector<uint8_t> out;
  JpegEncoder e;
  DLSCALE_CHECK(jpeg_write(e, image, quality, out), "cannot encode JPEG: {}", e.err.message);
  return out;
}

std::vector<uint8_t> encode_png(const Image& image) {
  check_encodable(image, PNG_UINT_31_MAX);
  PngImage p;
  p.image.width = static_cast<png_uint_32>(image.width);
  p.image.height = static_cast<png_uint_32>(image.height);
  p.image.format = image.channels == 3 ? PNG_FORMAT_RGB : PNG_FORMAT_GRAY;
  png_alloc_size_t size = 0;
  DLSCALE_CHECK(
      png_image_write_to_memory(&p.image, nullptr, &size, 0, image.pixels.data(), 0, nullptr) != 0,
      "cannot encode PNG: {}", p.image.message);
  std::vector<uint8_t> out(size);
  DLSCALE_CHECK(png_image_write_to_memory(&p.image, out.data(), &size, 0, image.pixels.data(), 0,
                                          nullptr) != 0,
                "cannot encode PNG: {}", p.image.message);
  out.resize(size);
  return out;
}

}  // namespace dlscale::data
