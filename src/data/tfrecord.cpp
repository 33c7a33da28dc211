#include "data/tfrecord.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <fstream>
#include <optional>
#include <utility>

#include "core/error.h"
#include "data/byte_source.h"

namespace dlscale::data {

namespace {

constexpr uint32_t kCrc32cPoly = 0x82F63B78;  // Castagnoli, bit-reversed

constexpr std::array<uint32_t, 256> make_crc32c_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kCrc32cPoly : c >> 1;
    t[i] = c;
  }
  return t;
}

constexpr std::array<uint32_t, 256> kCrc32cTable = make_crc32c_table();

constexpr size_t kHeaderBytes = kTfrecordHeaderBytes;
constexpr size_t kFooterBytes = kTfrecordFooterBytes;
constexpr size_t kCrcChunk = size_t{1} << 20;

uint64_t load_le(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

void store_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint32_t crc_of(std::string_view s, uint32_t crc = 0) {
  return crc32c(reinterpret_cast<const uint8_t*>(s.data()), s.size(), crc);
}

/// The framing walk shared by the file and in-memory indexers.
template <typename Source>
std::vector<RecordSpan> index_records(const Source& src, const std::string& name,
                                      bool verify_data) {
  std::vector<RecordSpan> spans;
  std::string scratch;
  const uint64_t size = src.size();
  uint64_t pos = 0;
  for (int64_t k = 0; pos < size; ++k) {
    const auto fail = [&](const std::string& what) {
      return Error(fmt::format("{}: record {} at byte {}: {}", name, k, pos, what));
    };
    if (size - pos < kHeaderBytes) {
      throw fail(fmt::format("truncated header ({} of {} bytes)", size - pos, kHeaderBytes));
    }
    const std::string_view head = src.read(pos, kHeaderBytes, scratch);
    const uint64_t length = load_le(head.data(), 8);
    const auto stored = static_cast<uint32_t>(load_le(head.data() + 8, 4));
    const uint32_t computed = mask_crc(crc_of(head.substr(0, 8)));
    if (stored != computed) {
      throw fail(fmt::format("length crc mismatch (stored 0x{:08x}, computed 0x{:08x})", stored,
                             computed));
    }
    if (length > kMaxTfrecordLength) {
      throw fail(fmt::format("length {} exceeds the 1 GiB limit", length));
    }
    const uint64_t data_at = pos + kHeaderBytes;
    if (size - data_at < length + kFooterBytes) {
      throw fail(fmt::format("truncated: the file ends {} bytes into a {}-byte record", size - pos,
                             kHeaderBytes + length + kFooterBytes));
    }
    if (verify_data) {
      uint32_t crc = 0;
      for (uint64_t done = 0; done < length;) {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(kCrcChunk, length - done));
        crc = crc_of(src.read(data_at + done, n, scratch), crc);
        done += n;
      }
      const auto want = static_cast<uint32_t>(
          load_le(src.read(data_at + length, kFooterBytes, scratch).data(), 4));
      if (want != mask_crc(crc)) {
        throw fail(fmt::format("data crc mismatch (stored 0x{:08x}, computed 0x{:08x})", want,
                               mask_crc(crc)));
      }
    }
    spans.push_back(RecordSpan{data_at, length});
    pos = data_at + length + kFooterBytes;
  }
  return spans;
}

// --- tf.train.Example: just enough protobuf wire format ---------------------

enum WireType : int {
  kVarint = 0,
  kFixed64 = 1,
  kLen = 2,
  kStartGroup = 3,
  kEndGroup = 4,
  kFixed32 = 5
};

// Example{1: Features}; Features{1: map entry}; entry{1: key, 2: Feature};
// Feature{1: BytesList, 2: FloatList, 3: Int64List}; each list{1: values}.
constexpr uint32_t kFeatureBytes = 1;
constexpr uint32_t kFeatureInt64 = 3;
constexpr int kMaxGroupDepth = 64;
constexpr std::string_view kImageKey = "image/encoded";
constexpr std::string_view kLabelKey = "image/class/label";
constexpr std::string_view kFormatKey = "image/format";

[[noreturn]] void malformed(const std::string& what) {
  throw Error("malformed tf.train.Example: " + what);
}

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void put_len(std::string& out, uint32_t field, std::string_view bytes) {
  put_varint(out, (uint64_t{field} << 3) | kLen);
  put_varint(out, bytes.size());
  out.append(bytes.data(), bytes.size());
}

/// A bounds-checked cursor over one protobuf message.
class WireReader {
 public:
  explicit WireReader(std::string_view data) : data_(data) {}
  bool done() const { return pos_ >= data_.size(); }

  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (done()) malformed("truncated varint");
      const auto byte = static_cast<uint8_t>(data_[pos_++]);
      if (shift == 63 && byte > 1) malformed("varint longer than 64 bits");
      v |= uint64_t{byte & 0x7fu} << shift;
      if ((byte & 0x80) == 0) return v;
    }
    malformed("varint longer than 10 bytes");
  }

  /// Reads a field key: {field number, wire type}.
  std::pair<uint32_t, int> key() {
    const uint64_t k = varint();
    const uint64_t field = k >> 3;
    if (field == 0 || field > (uint64_t{1} << 29) - 1) {
      malformed(fmt::format("invalid field number {}", field));
    }
    return {static_cast<uint32_t>(field), static_cast<int>(k & 7)};
  }

  std::string_view bytes() {
    const uint64_t n = varint();
    if (n > data_.size() - pos_) {
      malformed(fmt::format("length {} exceeds the {} bytes left", n, data_.size() - pos_));
    }
    const std::string_view v = data_.substr(pos_, n);
    pos_ += n;
    return v;
  }

  /// Skips the value of a field that is not needed.
  void skip(uint32_t field, int wire_type, int depth = 0) {
    switch (wire_type) {
      case kVarint:
        varint();
        return;
      case kLen:
        bytes();
        return;
      case kFixed64:
        advance(8);
        return;
      case kFixed32:
        advance(4);
        return;
      case kStartGroup:
        skip_group(field, depth);
        return;
      case kEndGroup:
        malformed(fmt::format("unmatched end of group {}", field));
      default:
        malformed(fmt::format("invalid wire type {} in field {}", wire_type, field));
    }
  }

 private:
  void advance(size_t n) {
    if (n > data_.size() - pos_) malformed("truncated fixed-width value");
    pos_ += n;
  }

  void skip_group(uint32_t field, int depth) {
    if (depth >= kMaxGroupDepth) malformed("groups nested too deeply");
    while (!done()) {
      const auto [f, type] = key();
      if (type == kEndGroup) {
        if (f != field) malformed(fmt::format("group {} ended as group {}", field, f));
        return;
      }
      skip(f, type, depth + 1);
    }
    malformed(fmt::format("unterminated group {}", field));
  }

  std::string_view data_;
  size_t pos_ = 0;
};

/// Checks that a message's field `field` has the wire type its schema says.
void expect_type(int type, int want, uint32_t field, std::string_view in) {
  if (type != want) {
    malformed(fmt::format("field {} of {} has wire type {}, expected {}", field, in, type, want));
  }
}

/// The first value of a serialized Int64List (packed or not), if any.
std::optional<int64_t> first_int64(std::string_view list) {
  std::optional<int64_t> first;
  WireReader r(list);
  while (!r.done()) {
    const auto [field, type] = r.key();
    if (field != 1) {
      r.skip(field, type);
    } else if (type == kVarint) {
      const auto v = static_cast<int64_t>(r.varint());
      if (!first) first = v;
    } else {
      expect_type(type, kLen, field, "Int64List");
      WireReader packed(r.bytes());
      while (!packed.done()) {
        const auto v = static_cast<int64_t>(packed.varint());
        if (!first) first = v;
      }
    }
  }
  return first;
}

/// The first value of a serialized BytesList, if any.
std::optional<std::string_view> first_bytes(std::string_view list) {
  std::optional<std::string_view> first;
  WireReader r(list);
  while (!r.done()) {
    const auto [field, type] = r.key();
    if (field != 1) {
      r.skip(field, type);
      continue;
    }
    expect_type(type, kLen, field, "BytesList");
    const std::string_view v = r.bytes();
    if (!first) first = v;
  }
  return first;
}

/// The list a serialized Feature holds, when it is of kind `want` (1 bytes,
/// 3 int64); nullopt for an empty Feature; an error for another kind.
std::optional<std::string_view> feature_list(std::string_view feature, uint32_t want,
                                             std::string_view name) {
  uint32_t kind = 0;  // a oneof: the last one present wins
  std::string_view list;
  WireReader r(feature);
  while (!r.done()) {
    const auto [field, type] = r.key();
    if (field < 1 || field > 3) {
      r.skip(field, type);
      continue;
    }
    expect_type(type, kLen, field, "Feature");
    kind = field;
    list = r.bytes();
  }
  if (kind == 0) return std::nullopt;
  if (kind != want) {
    static constexpr std::string_view kKinds[] = {"", "bytes_list", "float_list", "int64_list"};
    malformed(fmt::format("feature '{}' is a {}, expected a {}", name, kKinds[kind], kKinds[want]));
  }
  return list;
}

/// Applies one features-map entry {1: key, 2: Feature} to `out`; a repeated
/// key replaces the earlier value, as protobuf maps do.
void apply_entry(std::string_view entry, ExampleFields& out) {
  std::string_view key, value;
  WireReader r(entry);
  while (!r.done()) {
    const auto [field, type] = r.key();
    if (field != 1 && field != 2) {
      r.skip(field, type);
      continue;
    }
    expect_type(type, kLen, field, "a features map entry");
    (field == 1 ? key : value) = r.bytes();
  }
  if (key == kImageKey) {
    const auto list = feature_list(value, kFeatureBytes, key);
    const auto v = list ? first_bytes(*list) : std::nullopt;
    out.has_image = v.has_value();
    out.image = std::string(v.value_or(std::string_view()));
  } else if (key == kLabelKey) {
    const auto list = feature_list(value, kFeatureInt64, key);
    const auto v = list ? first_int64(*list) : std::nullopt;
    out.has_label = v.has_value();
    out.label = v.value_or(0);
  }
}

}  // namespace

uint32_t crc32c_portable(const uint8_t* data, size_t size, uint32_t crc) {
  crc = ~crc;
  for (size_t i = 0; i < size; ++i) crc = kCrc32cTable[(crc ^ data[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
namespace {

/// SSE4.2's crc32 instruction computes CRC32C (the same polynomial), 8 bytes
/// at a time: about 20x the table's speed, which made the check of every
/// TFRecord's data the pipeline's largest cost after JPEG decoding.
__attribute__((target("sse4.2"))) uint32_t crc32c_sse42(const uint8_t* data, size_t size, uint32_t crc) {
  uint64_t c = ~crc;
  for (; size >= 8; size -= 8, data += 8) {
    uint64_t word = 0;
    std::memcpy(&word, data, 8);
    c = __builtin_ia32_crc32di(c, word);
  }
  auto c32 = static_cast<uint32_t>(c);
  for (; size > 0; --size, ++data) c32 = __builtin_ia32_crc32qi(c32, *data);
  return ~c32;
}

}  // namespace

uint32_t crc32c(const uint8_t* data, size_t size, uint32_t crc) {
  static const bool sse42 = __builtin_cpu_supports("sse4.2");
  return sse42 ? crc32c_sse42(data, size, crc) : crc32c_portable(data, size, crc);
}
#else
uint32_t crc32c(const uint8_t* data, size_t size, uint32_t crc) { return crc32c_portable(data, size, crc); }
#endif

uint32_t mask_crc(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

bool starts_like_tfrecord(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::array<char, kTfrecordHeaderBytes> head{};
  if (!in.read(head.data(), head.size())) return false;
  const std::string_view length(head.data(), 8);
  return static_cast<uint32_t>(load_le(head.data() + 8, 4)) == mask_crc(crc_of(length));
}

void append_tfrecord(std::string& out, std::string_view payload) {
  std::string head;
  store_le(head, payload.size(), 8);
  store_le(head, mask_crc(crc_of(head)), 4);
  out += head;
  out.append(payload.data(), payload.size());
  store_le(out, mask_crc(crc_of(payload)), 4);
}

std::vector<RecordSpan> index_tfrecord(const std::string& path, bool verify_data) {
  const FileBytes file(path);
  return index_records(file, path, verify_data);
}

std::vector<RecordSpan> index_tfrecord_bytes(std::string_view bytes, const std::string& name,
                                             bool verify_data) {
  return index_records(MemoryBytes(bytes), name, verify_data);
}

void check_record_crc(std::string_view payload, uint32_t masked_crc, const std::string& path,
                      int64_t record) {
  const uint32_t computed = mask_crc(crc_of(payload));
  DLSCALE_CHECK(computed == masked_crc,
                "{}: record {}: data crc mismatch (stored 0x{:08x}, computed 0x{:08x})", path,
                record, masked_crc, computed);
}

std::string encode_example(std::string_view image_bytes, int64_t label, std::string_view format) {
  std::string bytes_list, feature, entry, features;
  const auto add_entry = [&](std::string_view key, uint32_t kind, const std::string& list) {
    feature.clear();
    put_len(feature, kind, list);
    entry.clear();
    put_len(entry, 1, key);
    put_len(entry, 2, feature);
    put_len(features, 1, entry);
  };
  std::string packed, int64_list;
  put_varint(packed, static_cast<uint64_t>(label));
  put_len(int64_list, 1, packed);  // packed, as proto3 writes repeated int64
  add_entry(kLabelKey, kFeatureInt64, int64_list);
  put_len(bytes_list, 1, image_bytes);
  add_entry(kImageKey, kFeatureBytes, bytes_list);
  bytes_list.clear();
  put_len(bytes_list, 1, format);
  add_entry(kFormatKey, kFeatureBytes, bytes_list);
  std::string example;
  put_len(example, 1, features);
  return example;
}

ExampleFields decode_example(std::string_view payload) {
  ExampleFields out;
  WireReader example(payload);
  while (!example.done()) {
    const auto [field, type] = example.key();
    if (field != 1) {
      example.skip(field, type);
      continue;
    }
    expect_type(type, kLen, field, "Example");
    WireReader features(example.bytes());  // several Features messages merge
    while (!features.done()) {
      const auto [f, t] = features.key();
      if (f != 1) {
        features.skip(f, t);
        continue;
      }
      expect_type(t, kLen, f, "Features");
      apply_entry(features.bytes(), out);
    }
  }
  return out;
}

}  // namespace dlscale::data
