// libFuzzer harness: the index sidecar parser (data/shard_index.h) on files
// it did not write, as opening a location meets them: a sidecar edited by
// hand, truncated, or foreign. The input's first byte picks how the rest is
// used:
//   even: the whole sidecar, as read from disk (checksum line included);
//   odd:  the sidecar's body, to which the harness appends a valid checksum
//         line, so that hostile lines get past the checksum as a hand edit
//         that recomputed it would.
// The parser must return or throw dlscale::Error. What it accepts is checked
// further: its samples lie in order inside the shard (TFRecord's tile it),
// labels are >= 0, and it serializes back to the text it parsed.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "data/shard_index.h"
#include "data/tfrecord.h"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

void check_accepted(const dlscale::data::ShardIndex& index, const std::string& text) {
  uint64_t end = 0;
  for (const auto& e : index.entries) {
    check(e.offset >= end && e.size <= index.shard_bytes && e.offset + e.size <= index.shard_bytes);
    check(e.label >= 0);
    check(index.format != "tfrecord" || e.offset == end);
    end = e.offset + e.size;
  }
  check(index.format != "tfrecord" || end == index.shard_bytes);
  check(dlscale::data::serialize_index(index) == text);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  if (data[0] % 2 == 1) {
    const uint32_t crc = dlscale::data::crc32c(reinterpret_cast<const uint8_t*>(text.data()), text.size());
    text += "crc32c " + fmt::format("{:08x}", crc) + "\n";
  }
  try {
    const dlscale::data::ShardIndex index = dlscale::data::parse_index(text, "fuzz.dlsidx");
    check_accepted(index, text);
  } catch (const dlscale::Error&) {
  }
  return 0;
}
