#pragma once
// Index sidecars of record shards (docs/data.md, "Index sidecars"): beside
// every TFRecord or WebDataset shard SHARD, the text file SHARD.dlsidx lists
// where each sample lies and its label, so that opening a location reads the
// indexes instead of every record. An index is trusted only when its
// checksum holds, it parses and describes a shard of the same size and
// modification time; otherwise the shard is scanned as before.
//
//   dlscale-shard-index 1 tfrecord|wds
//   shard-bytes B mtime-ns T samples N labels MIN MAX
//   OFFSET SIZE LABEL [KEY]          one line per sample, in shard order
//   crc32c XXXXXXXX                   of every byte before this line
//
// TFRecord: OFFSET is the framed record's first byte and SIZE its framed
// bytes (payload + 16), as DALI's tfrecord2idx writes them, so the first two
// columns of the sample lines are DALI's index. WebDataset: OFFSET and SIZE
// are the image member's data; KEY (the rest of the line, '%' and control
// bytes %-escaped) is the sample's key.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dlscale::data {

/// The file name suffix of an index sidecar.
inline constexpr const char* kIndexSuffix = ".dlsidx";

/// One sample of a shard.
struct IndexEntry {
  uint64_t offset = 0;
  uint64_t size = 0;
  int64_t label = 0;
  std::string key;  ///< WebDataset's sample key; "" for TFRecord
};

struct ShardIndex {
  std::string format;       ///< "tfrecord" | "wds"
  uint64_t shard_bytes = 0;
  int64_t shard_mtime_ns = 0;
  std::vector<IndexEntry> entries;
};

/// SHARD.dlsidx.
std::string index_path(const std::string& shard);

/// The sidecar's text (with its checksum line).
std::string serialize_index(const ShardIndex& index);

/// Parses a sidecar; throws dlscale::Error "<name>: <what>" when it is
/// malformed, its checksum fails, or its entries do not fit together.
ShardIndex parse_index(std::string_view text, const std::string& name);

/// The shard's index when its sidecar exists and can be trusted for
/// `format`; else nullopt, with `why` saying why ("no index", "stale: ...",
/// "corrupt: ...").
std::optional<ShardIndex> load_index(const std::string& shard, const std::string& format, std::string& why);

/// Reads the whole shard: TFRecord framing and each Example's label, or tar
/// headers and each sample's .cls member. Throws dlscale::Error naming the
/// shard and the record or sample at fault.
ShardIndex scan_shard(const std::string& shard, const std::string& format);

/// `entries` of `shard` as it is now (its size and modification time).
ShardIndex stamped_index(const std::string& shard, const std::string& format, std::vector<IndexEntry> entries);

/// Writes SHARD.dlsidx atomically. Throws dlscale::Error when the shard's
/// size or modification time is no longer the index's (it changed while
/// being indexed) or the entries do not fit in it.
void write_index(const std::string& shard, const ShardIndex& index);

/// The shard's entries: from a trusted index, else from a scan (`scanned`
/// gets the reason, and the shard is left as it is).
std::vector<IndexEntry> shard_entries(const std::string& shard, const std::string& format, std::string& scanned);

}  // namespace dlscale::data
