#pragma once
// TFRecord files (the framing TensorFlow writes) and the small part of
// tf.train.Example that image data sets use, as tf_cnn_benchmarks' ImageNet
// TFRecords store it. Written here, without a protobuf library.
//
// A record on disk:
//   uint64 length (little-endian), uint32 masked crc32c of those 8 bytes,
//   `length` bytes of data, uint32 masked crc32c of the data.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dlscale::data {

/// CRC-32C (Castagnoli), software table-driven. `crc` continues an earlier
/// checksum (0 to start). crc32c("123456789") == 0xE3069283.
/// SSE4.2's instruction where the CPU has it, else crc32c_portable.
uint32_t crc32c(const uint8_t* data, size_t size, uint32_t crc = 0);
/// The same, one table look-up a byte (the reference the tests compare with).
uint32_t crc32c_portable(const uint8_t* data, size_t size, uint32_t crc = 0);

/// TFRecord's masked CRC: ((crc >> 15) | (crc << 17)) + 0xa282ead8.
uint32_t mask_crc(uint32_t crc);

/// The largest record length accepted when reading (1 GiB); a larger length
/// field is treated as corruption.
inline constexpr uint64_t kMaxTfrecordLength = uint64_t{1} << 30;

/// A record's framing: before the payload its uint64 length and that
/// length's masked CRC; after it the payload's masked CRC.
inline constexpr uint64_t kTfrecordHeaderBytes = 12;
inline constexpr uint64_t kTfrecordFooterBytes = 4;

/// Whether the file at `path` starts with a TFRecord length whose masked CRC
/// matches (a chance of 2^-32 for other bytes); false when unreadable,
/// shorter than a header or empty.
bool starts_like_tfrecord(const std::string& path);

/// Appends one framed record holding `payload` to `out`.
void append_tfrecord(std::string& out, std::string_view payload);

/// Where one record's payload lies in its file.
struct RecordSpan {
  uint64_t offset = 0;  ///< byte offset of the payload's first byte
  uint64_t length = 0;  ///< payload length in bytes
};

/// Reads a TFRecord file's framing sequentially: checks every length CRC and,
/// when `verify_data`, every data CRC; returns each record's span in order.
/// A truncated file, a bad CRC or a length over kMaxTfrecordLength throws
/// dlscale::Error "FILE: record K at byte OFF: <what>" (K 0-based, OFF the
/// record's first byte); an unreadable file throws naming it.
std::vector<RecordSpan> index_tfrecord(const std::string& path, bool verify_data);

/// index_tfrecord on a file's contents already in memory; `name` stands for
/// the file in messages.
std::vector<RecordSpan> index_tfrecord_bytes(std::string_view bytes, const std::string& name,
                                             bool verify_data);

/// Checks the data CRC of a payload read separately: `masked_crc` is the 4
/// bytes stored after it (little-endian). Throws dlscale::Error
/// "PATH: record K: data crc mismatch (...)" when they disagree.
void check_record_crc(std::string_view payload, uint32_t masked_crc, const std::string& path,
                      int64_t record);

/// Serializes a tf.train.Example with the features "image/encoded" (one
/// bytes value), "image/class/label" (one int64 value) and "image/format"
/// (one bytes value, "JPEG" or "PNG").
std::string encode_example(std::string_view image_bytes, int64_t label, std::string_view format);

/// The two features a trainer needs from an Example.
struct ExampleFields {
  std::string image;       ///< "image/encoded": the encoded image bytes
  int64_t label = 0;       ///< "image/class/label"
  bool has_image = false;  ///< whether "image/encoded" held a value
  bool has_label = false;  ///< whether "image/class/label" held a value
};

/// Parses "image/encoded" and "image/class/label" out of a serialized
/// tf.train.Example, skipping unknown fields of every wire type; accepts
/// packed and unpacked int64 lists and map entries in either field order.
/// When a list holds several values the first is taken. Every varint and
/// length is bounds-checked: malformed input throws dlscale::Error
/// "malformed tf.train.Example: <what>".
ExampleFields decode_example(std::string_view payload);

}  // namespace dlscale::data
