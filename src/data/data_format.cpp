#include "data/data_format.h"

#include <fmt/format.h>

#include "core/error.h"
#include "data/encoded_dataset.h"
#include "data/idx_dataset.h"
#include "data/shard_index.h"
#include "data/tfrecord.h"

namespace dlscale::data {
namespace {

namespace fs = std::filesystem;

std::unique_ptr<Dataset> open_idx_with(const std::string& path, Split split, int64_t channels, ShardPick) {
  std::unique_ptr<Dataset> d = open_idx(path, split);
  DLSCALE_CHECK(channels == 0 || d->info().channels == channels,
                "--data idx:{}: the images have {} channel(s) but the model takes {} (choose a "
                "{}-channel model, e.g. lenet for 1)",
                path, d->info().channels, channels, d->info().channels);
  return d;
}

std::unique_ptr<Dataset> open_folder_with(const std::string& path, Split split, int64_t channels, ShardPick) {
  return open_folder(path, split, channels);
}

bool is_dir(const fs::path& entry) {
  std::error_code ec;
  return fs::is_directory(entry, ec) && entry.filename().string().front() != '.';
}

bool looks_like_tfrecord(const fs::path& entry) {
  std::error_code ec;
  return fs::is_regular_file(entry, ec) && entry.extension() != kIndexSuffix && starts_like_tfrecord(entry.string());
}

std::deque<DataFormat> make_formats() {
  DataFormat idx{"idx", "IDX files"};
  idx.pack_encoding = "png";
  idx.recognises = [](const fs::path& e) { return e.filename().string().find("idx3-ubyte") != std::string::npos; };
  idx.open = open_idx_with;
  DataFormat wds{"wds", "WebDataset .tar files"};
  wds.record_shards = true;
  wds.shard_suffix = ".tar";
  wds.file_location = true;
  wds.recognises = [](const fs::path& e) { return e.extension() == ".tar"; };
  wds.open = open_wds;
  DataFormat folder{"folder", "class subdirectories"};
  folder.pack_encoding = "jpeg";
  folder.recognises = is_dir;
  folder.open = open_folder_with;
  DataFormat tfrecord{"tfrecord", "TFRecord files"};
  tfrecord.record_shards = true;
  tfrecord.file_location = true;
  tfrecord.recognises = looks_like_tfrecord;
  tfrecord.open = open_tfrecord;
  tfrecord.verify_file = [](const std::string& file) { index_tfrecord(file, /*verify_data=*/true); };
  return {idx, wds, folder, tfrecord};
}

/// The table; a deque, so that a registration keeps earlier entries where
/// find_data_format() pointed.
std::deque<DataFormat>& format_table() {
  static std::deque<DataFormat> formats = make_formats();
  return formats;
}

}  // namespace

const std::deque<DataFormat>& data_formats() { return format_table(); }

void register_data_format(DataFormat format) {
  DLSCALE_CHECK(format.kind != nullptr && *format.kind != '\0' && format.on_disk != nullptr &&
                    format.recognises != nullptr && format.open != nullptr,
                "a data format needs a kind, a description, recognises and open");
  DLSCALE_CHECK(find_data_format(format.kind) == nullptr, "data kind '{}' is taken", format.kind);
  format_table().push_back(format);
}

const DataFormat* find_data_format(const std::string& kind) {
  for (const DataFormat& f : data_formats()) {
    if (kind == f.kind) return &f;
  }
  return nullptr;
}

const DataFormat& data_format(const std::string& kind) {
  if (const DataFormat* f = find_data_format(kind)) return *f;
  std::string kinds;
  for (const DataFormat& f : data_formats()) kinds += (kinds.empty() ? "" : ", ") + std::string(f.kind);
  throw Error(fmt::format("unknown data kind '{}' (allowed: {})", kind, kinds));
}

}  // namespace dlscale::data
