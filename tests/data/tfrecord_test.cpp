#include "data/tfrecord.h"

#include <gtest/gtest.h>

#include <limits>

#include "core/error.h"
#include "data/data_test_util.h"
#include "data/data_tools.h"
#include "data/shard_index.h"

namespace dlscale::data {
namespace {

using dlscale::testing::contains;
using dlscale::testing::error_message;
using dlscale::testing::TempDir;
using dlscale::testing::write_bytes;

uint32_t crc_of(const std::string& s) {
  return crc32c(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

// The test's own TFRecord writer: every framing byte put down by hand.
void put_u32_le(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint32_t masked(uint32_t c) { return ((c >> 15) | (c << 17)) + 0xa282ead8u; }
std::string hand_record(const std::string& payload) {
  std::string len;
  for (int i = 0; i < 8; ++i) len.push_back(static_cast<char>((payload.size() >> (8 * i)) & 0xff));
  std::string out = len;
  put_u32_le(out, masked(crc_of(len)));
  out += payload;
  put_u32_le(out, masked(crc_of(payload)));
  return out;
}

TEST(Crc32c, KnownVectors) {
  EXPECT_EQ(crc_of("123456789"), 0xE3069283u);
  EXPECT_EQ(crc_of(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(crc_of(std::string(32, '\xff')), 0x62A8AB43u);
  std::string ramp;
  for (int i = 0; i < 32; ++i) ramp.push_back(static_cast<char>(i));
  EXPECT_EQ(crc_of(ramp), 0x46DD794Eu);
  EXPECT_EQ(crc_of(""), 0u);
}

TEST(Crc32c, ContinuesAcrossChunks) {
  const std::string s = "123456789";
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  EXPECT_EQ(crc32c(p + 4, 5, crc32c(p, 4)), 0xE3069283u);
}

// The hardware path (SSE4.2, where the CPU has it) and the table agree on
// every length and alignment, and chained.
TEST(Crc32c, TheFastPathIsTheTables) {
  std::string bytes;
  uint64_t state = 7;
  for (int i = 0; i < 300; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    bytes.push_back(static_cast<char>(state >> 56));
  }
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  for (size_t offset = 0; offset < 8; ++offset) {
    for (size_t size = 0; size + offset <= bytes.size(); size += 1 + size / 8) {
      ASSERT_EQ(crc32c(p + offset, size), crc32c_portable(p + offset, size)) << offset << " " << size;
      ASSERT_EQ(crc32c(p + offset, size, 0x12345678u), crc32c_portable(p + offset, size, 0x12345678u));
    }
  }
}

TEST(Crc32c, Mask) {
  EXPECT_EQ(mask_crc(0), 0xA282EAD8u);
  EXPECT_EQ(mask_crc(0xE3069283u), 0xC78AB0E5u);
}

// Bytes computed outside dlscale (Python) for the payload "hello".
TEST(TfRecord, AppendMatchesGoldenBytes) {
  const std::string golden(
      "\x05\x00\x00\x00\x00\x00\x00\x00"
      "\xea\xb2\x04\x3e"
      "hello"
      "\xbb\x1f\x1c\x19",
      21);
  std::string out;
  append_tfrecord(out, "hello");
  EXPECT_EQ(out, golden);
  EXPECT_EQ(hand_record("hello"), golden);
}

class TfRecordFile : public ::testing::Test {
 protected:
  // Records "hello" (5 bytes), "" and "world!!" (7): payloads at 12, 33, 49.
  std::string bytes_ = hand_record("hello") + hand_record("") + hand_record("world!!");
  TempDir dir_;
  std::string path_ = dir_.file("data.tfrecord");
};

TEST_F(TfRecordFile, IndexesRecordsWrittenByHand) {
  write_bytes(path_, bytes_);
  for (const bool verify : {false, true}) {
    const auto spans = index_tfrecord(path_, verify);
    ASSERT_EQ(spans.size(), 3u);
    EXPECT_EQ(spans[0].offset, 12u);
    EXPECT_EQ(spans[0].length, 5u);
    EXPECT_EQ(spans[1].offset, 33u);
    EXPECT_EQ(spans[1].length, 0u);
    EXPECT_EQ(spans[2].offset, 49u);
    EXPECT_EQ(spans[2].length, 7u);
    EXPECT_EQ(bytes_.substr(spans[2].offset, spans[2].length), "world!!");
  }
  EXPECT_TRUE(index_tfrecord_bytes("", "empty", true).empty());
}

TEST_F(TfRecordFile, FlippedDataByteNamesTheRecord) {
  bytes_[50] ^= 0x01;  // inside "world!!", record 2
  write_bytes(path_, bytes_);
  EXPECT_EQ(index_tfrecord(path_, false).size(), 3u);  // framing alone is intact
  const std::string msg = error_message([&] { index_tfrecord(path_, true); });
  EXPECT_TRUE(contains(msg, path_ + ": record 2 at byte 37: data crc mismatch"));
}

TEST_F(TfRecordFile, FlippedLengthByteIsCaughtWithoutVerifyingData) {
  bytes_[21] ^= 0x40;  // record 1's length field (record 1 starts at byte 21)
  write_bytes(path_, bytes_);
  const std::string msg = error_message([&] { index_tfrecord(path_, false); });
  EXPECT_TRUE(contains(msg, path_ + ": record 1 at byte 21: length crc mismatch"));
}

TEST_F(TfRecordFile, TruncatedFilesAreReported) {
  write_bytes(path_, bytes_.substr(0, bytes_.size() - 2));
  EXPECT_EQ(
      error_message([&] { index_tfrecord(path_, false); }),
      path_ + ": record 2 at byte 37: truncated: the file ends 21 bytes into a 23-byte record");
  write_bytes(path_, bytes_.substr(0, 40));
  EXPECT_EQ(error_message([&] { index_tfrecord(path_, false); }),
            path_ + ": record 2 at byte 37: truncated header (3 of 12 bytes)");
}

TEST(TfRecord, RefusesLengthsOverOneGiB) {
  std::string len;
  const uint64_t huge = (uint64_t{1} << 30) + 1;
  for (int i = 0; i < 8; ++i) len.push_back(static_cast<char>((huge >> (8 * i)) & 0xff));
  std::string bytes = len;
  put_u32_le(bytes, masked(crc_of(len)));
  bytes += "xx";
  EXPECT_TRUE(contains(error_message([&] { index_tfrecord_bytes(bytes, "big", false); }),
                       "big: record 0 at byte 0: length 1073741825 exceeds the 1 GiB limit"));
}

TEST(TfRecord, MissingFileIsNamed) {
  TempDir dir;
  EXPECT_TRUE(
      contains(error_message([&] { index_tfrecord(dir.file("nope"), false); }), dir.file("nope")));
  EXPECT_EQ(error_message([&] { index_tfrecord(dir.path(), false); }),
            "cannot read '" + dir.path() + "': not a regular file");
}

TEST(TfRecord, CheckRecordCrc) {
  EXPECT_NO_THROW(check_record_crc("hello", 0x191c1fbbu, "f", 3));
  EXPECT_EQ(error_message([&] { check_record_crc("hellp", 0x191c1fbbu, "f", 3); }),
            fmt::format("f: record 3: data crc mismatch (stored 0x191c1fbb, computed 0x{:08x})",
                        masked(crc_of("hellp"))));
}

// --- tf.train.Example ---------------------------------------------------------

TEST(Example, RoundTrip) {
  const std::string image("\xff\xd8\xff\x00 binary \x01", 13);
  for (const int64_t label :
       {int64_t{0}, int64_t{917}, int64_t{-3}, std::numeric_limits<int64_t>::min(),
        std::numeric_limits<int64_t>::max()}) {
    const ExampleFields f = decode_example(encode_example(image, label, "JPEG"));
    EXPECT_TRUE(f.has_image);
    EXPECT_TRUE(f.has_label);
    EXPECT_EQ(f.image, image);
    EXPECT_EQ(f.label, label);
  }
}

// A tiny protobuf writer for hand-built messages.
std::string varint(uint64_t v) {
  std::string out;
  for (; v >= 0x80; v >>= 7) out.push_back(static_cast<char>((v & 0x7f) | 0x80));
  out.push_back(static_cast<char>(v));
  return out;
}
std::string len_field(int field, const std::string& bytes) {
  return varint(static_cast<uint64_t>(field) << 3 | 2) + varint(bytes.size()) + bytes;
}
std::string varint_field(int field, uint64_t v) {
  return varint(static_cast<uint64_t>(field) << 3) + varint(v);
}
std::string example_of(const std::string& entries) { return len_field(1, entries); }

TEST(Example, HandBuiltPackedListAndReversedEntryOrder) {
  // Label: a packed int64 list {42, 7}; the entry's value comes before its key.
  const std::string label_feature = len_field(3, len_field(1, varint(42) + varint(7)));
  const std::string label_entry = len_field(2, label_feature) + len_field(1, "image/class/label");
  // Image: two values, an unknown fixed32 field in the entry.
  const std::string image_feature = len_field(1, len_field(1, "xyz") + len_field(1, "second"));
  const std::string image_entry =
      len_field(1, "image/encoded") + "\x1d\x01\x02\x03\x04" + len_field(2, image_feature);
  const std::string other_entry =
      len_field(1, "image/height") + len_field(2, len_field(3, len_field(1, varint(224))));
  // Unknown fields around: a varint, a fixed64 and a group in the Example.
  const std::string payload = varint_field(5, 99) + "\x31" + std::string(8, '\x07') +
                              example_of(len_field(1, other_entry) + len_field(1, label_entry) +
                                         len_field(1, image_entry)) +
                              "\x3b" + varint_field(1, 5) + "\x3c";
  const ExampleFields f = decode_example(payload);
  EXPECT_TRUE(f.has_image);
  EXPECT_TRUE(f.has_label);
  EXPECT_EQ(f.image, "xyz");
  EXPECT_EQ(f.label, 42);
}

TEST(Example, UnpackedInt64List) {
  const std::string feature = len_field(3, varint_field(1, 12) + varint_field(1, 13));
  const std::string entry = len_field(1, "image/class/label") + len_field(2, feature);
  const ExampleFields f = decode_example(example_of(len_field(1, entry)));
  EXPECT_FALSE(f.has_image);
  EXPECT_TRUE(f.has_label);
  EXPECT_EQ(f.label, 12);
}

TEST(Example, EmptyAndMissingFeatures) {
  EXPECT_FALSE(decode_example("").has_image);
  EXPECT_FALSE(decode_example("").has_label);
  const std::string empty_list = len_field(1, "image/class/label") + len_field(2, len_field(3, ""));
  EXPECT_FALSE(decode_example(example_of(len_field(1, empty_list))).has_label);
}

TEST(Example, MalformedInputThrows) {
  const std::string entry_head = len_field(1, "image/class/label");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"\x0a", "truncated varint"},
      {"\x0a\x05\x0a\x01", "length 5 exceeds the 2 bytes left"},
      {std::string("\x0a\x0b") + std::string(10, '\xff') + "\x01", "varint longer than"},
      {"\x17", "invalid wire type 7 in field 2"},
      {std::string(1, '\0'), "invalid field number 0"},
      {"\x0d\x00\x00\x00\x00", "field 1 of Example has wire type 5"},
      {"\x31\x00\x00", "truncated fixed-width value"},
      {"\x13\x0a\x01x", "unterminated group 2"},
      {"\x14", "unmatched end of group 2"},
      {example_of(len_field(1, entry_head + len_field(2, len_field(1, len_field(1, "x"))))),
       "feature 'image/class/label' is a bytes_list, expected a int64_list"},
  };
  for (const auto& [payload, what] : cases) {
    const std::string msg = error_message([&] { decode_example(payload); });
    EXPECT_TRUE(contains(msg, "malformed tf.train.Example: " + what)) << msg;
  }
  std::string deep;
  for (int i = 0; i < 100; ++i) deep += "\x13";  // field 2, start group, nested
  EXPECT_TRUE(contains(error_message([&] { decode_example(deep); }), "nested too deeply"));
}

// A bare path is TFRecord data only when a file starts with a TFRecord
// header: a directory of anything else was taken for TFRecord shards.
TEST(DataLocation, OnlyFilesThatStartLikeTfrecordAreTakenForIt) {
  TempDir dir;
  const std::string other = dir.path() + "/other", shards = dir.path() + "/shards";
  std::filesystem::create_directories(other);
  std::filesystem::create_directories(shards);
  write_bytes(other + "/notes.txt", "hello, these are not records\n");
  std::string record;
  append_tfrecord(record, "payload");
  write_bytes(shards + "/train-00000-of-00001", record);
  write_bytes(shards + "/train-00000-of-00001" + kIndexSuffix, "not checked here");
  EXPECT_EQ(parse_data_location(shards).kind, "tfrecord");
  EXPECT_EQ(parse_data_location(shards + "/train-00000-of-00001").kind, "tfrecord");
  for (const std::string& path : {other, other + "/notes.txt"}) {
    const std::string message = error_message([&] { parse_data_location(path); });
    EXPECT_TRUE(contains(message, path + ": not data of a kind dlscale recognises")) << message;
    EXPECT_TRUE(contains(message, "name its kind, e.g. tfrecord:" + path)) << message;
  }
  EXPECT_EQ(parse_data_location("tfrecord:" + other).kind, "tfrecord");  // named: taken as said
  // A header whose CRC is one bit off is not a TFRecord's.
  record[8] = static_cast<char>(record[8] ^ 1);
  write_bytes(other + "/almost", record);
  EXPECT_FALSE(starts_like_tfrecord(other + "/almost"));
  EXPECT_TRUE(starts_like_tfrecord(shards + "/train-00000-of-00001"));
}

}  // namespace
}  // namespace dlscale::data
