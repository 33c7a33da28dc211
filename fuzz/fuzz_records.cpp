// libFuzzer harness: the record formats a data loader reads from files it did
// not write — tf.train.Example, JPEG and PNG, TFRecord framing and tar
// headers. Each input goes to every parser. A parser must return or throw
// dlscale::Error; anything else (a crash, a sanitizer report, another
// exception) is a finding. What parses is checked further: spans lie inside
// the input, verified records pass their CRC check again, and decoded
// examples and images survive a re-encode unchanged.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/error.h"
#include "data/image_codec.h"
#include "data/tar_shards.h"
#include "data/tfrecord.h"

namespace {

using namespace dlscale::data;

// Larger images are parsed (probe_image) but not decoded: decoding a header
// that claims 16384 x 16384 pixels would only measure the allocator.
constexpr int64_t kMaxFuzzPixels = int64_t{1} << 18;

void check(bool ok) {
  if (!ok) std::abort();
}

/// Runs a step that must succeed: a dlscale::Error from it is a finding too.
template <typename Fn>
auto must(Fn&& fn) {
  try {
    return fn();
  } catch (const dlscale::Error&) {
    std::abort();
  }
}

void fuzz_example(std::string_view bytes) {
  const ExampleFields f = decode_example(bytes);
  if (!f.has_image || !f.has_label) return;
  const ExampleFields again =
      must([&] { return decode_example(encode_example(f.image, f.label, "JPEG")); });
  check(again.has_image && again.has_label && again.image == f.image && again.label == f.label);
}

/// A part of the image at a scale, as the pipeline's crops ask for it (from
/// the input's second-to-last byte): the very pixels of those rows and
/// columns of a whole decode at the same scale.
void fuzz_image_part(const uint8_t* data, size_t size, const ImageInfo& info, int channels) {
  const uint8_t k = size > 1 ? data[size - 2] : 0;
  DecodeRequest r;
  r.denominator = 1 << (k & 3);
  r.width = static_cast<double>(std::max<int64_t>(1, info.width * ((k >> 2) % 4 + 1) / 4));
  r.height = static_cast<double>(std::max<int64_t>(1, info.height * ((k >> 4) % 4 + 1) / 4));
  r.x0 = (static_cast<double>(info.width) - r.width) * ((k >> 6) & 1);
  r.y0 = (static_cast<double>(info.height) - r.height) * (k >> 7);
  DecodedPart whole;
  try {
    whole = decode_image_part(data, size, channels, [&](int64_t, int64_t) { return DecodeRequest{r.denominator}; });
  } catch (const dlscale::Error&) {
    return;  // not decodable at this scale: nothing to compare
  }
  const DecodedPart part = must([&] { return decode_image_part(data, size, channels, [&](int64_t, int64_t) { return r; }); });
  const Placement& p = part.placement;
  check(p.full_width == whole.image.width && p.full_height == whole.image.height);
  check(p.left >= 0 && p.top >= 0 && p.left + part.image.width <= whole.image.width &&
        p.top + part.image.height <= whole.image.height && part.image.channels == whole.image.channels);
  const auto row = static_cast<size_t>(part.image.width * part.image.channels);
  for (int64_t y = 0; y < part.image.height; ++y) {
    const auto at = static_cast<size_t>(((p.top + y) * whole.image.width + p.left) * whole.image.channels);
    check(std::equal(part.image.pixels.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(y) * row),
                     part.image.pixels.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(y + 1) * row),
                     whole.image.pixels.begin() + static_cast<std::ptrdiff_t>(at)));
  }
}

void fuzz_image(const uint8_t* data, size_t size) {
  const ImageInfo info = probe_image(data, size);
  if (info.width * info.height > kMaxFuzzPixels) return;
  const int channels = size == 0 ? 0 : (data[size - 1] % 3 == 2 ? 3 : data[size - 1] % 3);
  const Image im = decode_image(data, size, channels);
  check(im.height == info.height && im.width == info.width);
  check(im.channels == (channels == 0 ? info.channels : channels));
  check(im.pixels.size() == static_cast<size_t>(im.height * im.width * im.channels));
  const Image back = must([&] {
    const std::vector<uint8_t> png = encode_png(im);
    return decode_image(png.data(), png.size());
  });
  check(back.pixels == im.pixels);
  fuzz_image_part(data, size, info, channels);
}

void fuzz_tfrecord(std::string_view bytes) {
  for (const RecordSpan& s : index_tfrecord_bytes(bytes, "input", true)) {
    check(s.offset <= bytes.size() && s.length + 4 <= bytes.size() - s.offset);
    const std::string_view payload = bytes.substr(s.offset, s.length);
    uint32_t stored = 0;
    for (int i = 3; i >= 0; --i) {
      stored = (stored << 8) | static_cast<uint8_t>(bytes[s.offset + s.length + i]);
    }
    must([&] { check_record_crc(payload, stored, "input", 0); });  // verified above
    try {
      fuzz_example(payload);
    } catch (const dlscale::Error&) {
    }
  }
}

/// Frames the input as two records: indexing must find exactly those.
void fuzz_framing(std::string_view bytes) {
  const size_t half = bytes.size() / 2;
  std::string file;
  append_tfrecord(file, bytes.substr(0, half));
  append_tfrecord(file, bytes.substr(half));
  const auto spans = must([&] { return index_tfrecord_bytes(file, "framed", true); });
  check(spans.size() == 2 && spans[0].offset == 12 && spans[0].length == half);
  check(spans[1].offset == 12 + half + 4 + 12 && spans[1].length == bytes.size() - half);
}

void fuzz_tar(std::string_view bytes) {
  const auto members = list_tar_bytes(bytes, "input");
  for (const TarMember& m : members) {
    check(m.offset <= bytes.size() && m.size <= bytes.size() - m.offset && !m.name.empty());
  }
  group_wds(members);
}

template <typename Fn>
void expect_error_or_success(Fn&& fn) {
  try {
    fn();
  } catch (const dlscale::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  expect_error_or_success([&] { fuzz_example(bytes); });
  expect_error_or_success([&] { fuzz_image(data, size); });
  expect_error_or_success([&] { fuzz_tfrecord(bytes); });
  fuzz_framing(bytes);
  expect_error_or_success([&] { fuzz_tar(bytes); });
  return 0;
}
