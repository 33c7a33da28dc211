#pragma once
// The data formats `--data KIND:PATH` names, each described once: how
// dlscale recognises it on disk, opens it, and what the data tools (inspect,
// verify, index, pack) do with it. A new format is a Dataset of its own
// (docs/architecture.md, "Data") and one entry in data_format.cpp's table
// (or a register_data_format() call).
#include <deque>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace dlscale::data {

struct DataFormat {
  const char* kind;         ///< the KIND of --data KIND:PATH
  const char* on_disk;      ///< how errors describe it: "TFRecord files"
  /// Many shard files of records, each with its index (`data index`), that
  /// --data-order streaming splits among the workers; else one shard.
  bool record_shards = false;
  const char* shard_suffix = "";  ///< a record shard's file name ends so ("" = any)
  /// `data pack` reads it (and its images encode as `pack_encoding` by default).
  const char* pack_encoding = nullptr;
  /// Whether a file of this format is a location by itself; else only a
  /// directory of them is.
  bool file_location = false;
  /// Whether `entry` (a file or directory of a location) looks like this
  /// format's. Locations are recognised in the table's order.
  bool (*recognises)(const std::filesystem::path& entry) = nullptr;
  /// Opens the split with `channels` per image (0: as stored); throws
  /// dlscale::Error naming what is wrong.
  std::unique_ptr<Dataset> (*open)(const std::string& path, Split split, int64_t channels, ShardPick pick) = nullptr;
  /// `data verify`'s check of one of its files beyond decoding every
  /// sample (TFRecord: every record's CRCs); nullptr: none.
  void (*verify_file)(const std::string& file) = nullptr;
};

/// Every format, in the order locations are recognised.
const std::deque<DataFormat>& data_formats();
/// Adds `format` after the built-in ones, so that --data, open_dataset() and
/// the data tools know it: a format of one's own is a Dataset and this call
/// (at start-up, before any data is opened; not thread-safe). Throws
/// dlscale::Error when the kind is taken or the entry lacks a kind,
/// a description, `recognises` or `open`.
void register_data_format(DataFormat format);
/// The format named `kind`; nullptr when none is.
const DataFormat* find_data_format(const std::string& kind);
/// The format named `kind`; throws dlscale::Error listing the kinds.
const DataFormat& data_format(const std::string& kind);

}  // namespace dlscale::data
