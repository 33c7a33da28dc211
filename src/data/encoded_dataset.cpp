#include "data/encoded_dataset.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <iostream>

#include <dirent.h>
#include <sys/stat.h>

#include "core/error.h"
#include "core/files.h"
#include "data/byte_source.h"
#include "data/file_list.h"
#include "data/shard_index.h"
#include "data/tfrecord.h"

namespace dlscale::data {

namespace {

namespace fs = std::filesystem;

/// Where one sample of a shard lies.
struct Record {
  int32_t file = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
  int64_t label = 0;
  int64_t number = 0;  ///< the record's index in its file (TFRecord messages)
  std::string name;    ///< what the sample is called in messages
};

/// Encoded images, decoded on demand: what the layouts share. A subclass
/// fills info_ and says where each sample's bytes are; finish_open() then
/// probes the first image.
class EncodedImages : public Dataset {
 public:
  const DatasetInfo& info() const override { return info_; }
  Image image(int64_t i) const override { return image_part(i, nullptr).image; }
  DecodedPart image_part(int64_t i, const DecodePlan& plan) const override {
    const std::string b = bytes(i);
    try {
      return decode_image_part(reinterpret_cast<const uint8_t*>(b.data()), b.size(),
                               static_cast<int>(info_.channels), plan);
    } catch (const Error& e) {
      throw Error(fmt::format("{}: {}", where(i), e.what()));
    }
  }

 protected:
  explicit EncodedImages(DatasetInfo info) : info_(std::move(info)) {}
  /// The encoded image of sample i.
  virtual std::string bytes(int64_t i) const = 0;
  /// With info_.size and the labels known: the class count (when not set)
  /// from `max_label`, and the first image's shape.
  void finish_open(int64_t channels, int64_t max_label) {
    DLSCALE_CHECK(info_.size > 0, "{}: holds no samples", info_.location);
    info_.encoded = true;
    if (info_.num_classes == 0) info_.num_classes = max_label + 1;
    const std::string first = bytes(0);
    ImageInfo probe;
    try {
      probe = probe_image(reinterpret_cast<const uint8_t*>(first.data()), first.size());
    } catch (const Error& e) {
      throw Error(fmt::format("{}: {}", where(0), e.what()));
    }
    info_.image_size = probe.height == probe.width ? probe.height : 0;
    info_.channels = channels > 0 ? channels : probe.channels;
    imagenet_normalisation(info_.channels, info_.mean, info_.std);
  }

  DatasetInfo info_;
};

/// An image folder: each file one sample, its directory its class (the
/// FileList's directory index), read whole. Nothing per file but its name.
class FolderImages : public EncodedImages {
 public:
  FolderImages(DatasetInfo info, int64_t channels) : EncodedImages(std::move(info)) {
    info_.size = static_cast<int64_t>(info_.files.size());
    info_.shard_starts = {0};  // one shard
    finish_open(channels, info_.num_classes - 1);
  }
  int64_t label(int64_t i) const override { return info_.files.directory_of(static_cast<size_t>(i)); }
  std::string where(int64_t i) const override { return info_.files[static_cast<size_t>(i)]; }

 private:
  std::string bytes(int64_t i) const override {
    const FileBytes f(info_.files[static_cast<size_t>(i)]);
    return read_at(f, 0, f.size());
  }
};

enum class Layout { kTar, kTfRecord };

/// WebDataset or TFRecord shards: each sample a record at an offset.
class ShardImages : public EncodedImages {
 public:
  ShardImages(DatasetInfo info, std::vector<Record> records, Layout layout, int64_t channels)
      : EncodedImages(std::move(info)), records_(std::move(records)), layout_(layout) {
    for (const auto& f : info_.files) files_.push_back(std::make_unique<FileBytes>(f));
    info_.size = static_cast<int64_t>(records_.size());
    info_.shard_starts = {0};
    for (size_t i = 1; i < records_.size(); ++i) {
      if (records_[i].file != records_[i - 1].file) info_.shard_starts.push_back(static_cast<int64_t>(i));
    }
    int64_t max_label = 0;
    for (const auto& r : records_) max_label = std::max(max_label, r.label);
    finish_open(channels, max_label);
  }
  int64_t label(int64_t i) const override { return records_[static_cast<size_t>(i)].label; }
  std::string where(int64_t i) const override {
    const Record& r = records_[static_cast<size_t>(i)];
    const std::string file = info_.files[static_cast<size_t>(r.file)];
    return r.name.empty() ? file : fmt::format("{} {}", file, r.name);
  }

 private:
  /// For TFRecord: CRC-checked, then unpacked.
  std::string bytes(int64_t i) const override {
    const Record& r = records_[static_cast<size_t>(i)];
    const FileBytes& f = *files_[static_cast<size_t>(r.file)];
    if (layout_ == Layout::kTar) return read_at(f, r.offset, r.length);
    // The length header too: with the label, it tells a shard rewritten in
    // place (same size and mtime, so the index looked valid) from its index.
    const std::string framed =
        read_at(f, r.offset - kTfrecordHeaderBytes, kTfrecordHeaderBytes + r.length + kTfrecordFooterBytes);
    uint64_t length = 0;
    std::memcpy(&length, framed.data(), sizeof length);  // little-endian hosts only (x86, arm64)
    if (length != r.length) throw_stale(i, fmt::format("its length is {} bytes, the index says {}", length, r.length));
    const std::string_view payload(framed.data() + kTfrecordHeaderBytes, r.length);
    uint32_t crc = 0;
    std::memcpy(&crc, framed.data() + kTfrecordHeaderBytes + r.length, kTfrecordFooterBytes);
    check_record_crc(payload, crc, f.path(), r.number);
    ExampleFields fields;
    try {
      fields = decode_example(payload);
    } catch (const Error& e) {
      throw Error(fmt::format("{}: {}", where(i), e.what()));
    }
    if (!fields.has_label || fields.label != r.label) {
      throw_stale(i, fields.has_label ? fmt::format("its label is {}, the index says {}", fields.label, r.label)
                                      : std::string("it has no label, the index says ") + std::to_string(r.label));
    }
    return std::move(fields.image);
  }

  [[noreturn]] void throw_stale(int64_t i, const std::string& what) const {
    throw StaleIndex(fmt::format("{}: {}: the shard changed after its index was written; rewrite the index with "
                                 "'dlscale data index --force {}'",
                                 where(i), what, info_.location));
  }

  std::vector<Record> records_;
  Layout layout_;
  std::vector<std::unique_ptr<FileBytes>> files_;
};

/// NAME.jpg, .jpeg or .png, in any case.
bool is_image_name(std::string_view name) {
  const size_t dot = name.rfind('.');
  if (dot == std::string_view::npos || dot == 0) return false;  // ".png" alone is a hidden file, not an image
  std::string ext(name.substr(dot));
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext == ".jpg" || ext == ".jpeg" || ext == ".png";
}

std::vector<fs::path> sorted_entries(const fs::path& dir, bool directories) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().filename().string().front() == '.') continue;
    if (directories ? e.is_directory(ec) : e.is_regular_file(ec)) out.push_back(e.path());
  }
  DLSCALE_CHECK(!ec, "{}: cannot list: {}", dir.string(), ec.message());
  std::sort(out.begin(), out.end());
  return out;
}

/// Appends the images of the class folder `dir` (.jpg, .jpeg, .png, any
/// case; hidden files skipped; symbolic links followed) to `files` under
/// `directory`, sorted by name. The names are gathered in one buffer and
/// sorted by offset, so listing a folder of a million files holds about
/// their names' bytes and 8 bytes a file, not a path object each.
void list_images(const std::string& dir, uint32_t directory, FileList& files) {
  DIR* d = ::opendir(dir.c_str());
  DLSCALE_CHECK(d != nullptr, "{}: cannot list: {}", dir, std::strerror(errno));
  std::string names;
  std::vector<std::pair<uint32_t, uint32_t>> spans;  // offset, length in `names`
  for (;;) {
    errno = 0;  // readdir's end and its failure differ only by errno
    const dirent* e = ::readdir(d);
    if (e == nullptr) break;
    const std::string_view name = e->d_name;
    if (name.front() == '.' || !is_image_name(name)) continue;
    bool regular = e->d_type == DT_REG;
    if (e->d_type == DT_UNKNOWN || e->d_type == DT_LNK) {  // the file system does not say, or a link
      struct stat st {};
      regular = ::fstatat(::dirfd(d), e->d_name, &st, 0) == 0 && S_ISREG(st.st_mode);
    }
    if (!regular) continue;
    DLSCALE_CHECK(names.size() + name.size() <= UINT32_MAX, "{}: more than 4 GiB of file names", dir);
    spans.emplace_back(static_cast<uint32_t>(names.size()), static_cast<uint32_t>(name.size()));
    names += name;
  }
  const int err = errno;
  ::closedir(d);
  DLSCALE_CHECK(err == 0, "{}: cannot list: {}", dir, std::strerror(err));
  const auto view = [&names](const std::pair<uint32_t, uint32_t>& s) {
    return std::string_view(names).substr(s.first, s.second);
  };
  std::sort(spans.begin(), spans.end(), [&](const auto& a, const auto& b) { return view(a) < view(b); });
  for (const auto& span : spans) files.push_back(directory, view(span));
}

int64_t total_bytes(const FileList& files) {
  int64_t n = 0;
  std::error_code ec;
  for (const auto& f : files) n += static_cast<int64_t>(fs::file_size(f, ec));
  return n;
}

}  // namespace

std::vector<std::string> shard_files(const std::string& path, Split split,
                                     const std::string& extension) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) return {path};
  DLSCALE_CHECK(fs::exists(path, ec), "{}: no such file or directory", path);
  DLSCALE_CHECK(fs::is_directory(path, ec), "{}: not a regular file or a directory of shards", path);
  std::vector<std::string> all, train, test;
  for (const auto& p : sorted_entries(path, false)) {
    const std::string name = p.filename().string();
    if (!extension.empty() && p.extension() != extension) continue;
    if (p.extension() == kIndexSuffix) continue;  // an index sidecar, not a shard
    if (is_atomic_temporary(name)) continue;       // a shard being written (or left by a killed pack)
    all.push_back(p.string());
    if (name.rfind("train", 0) == 0) train.push_back(p.string());
    if (name.rfind("val", 0) == 0 || name.rfind("test", 0) == 0) test.push_back(p.string());
  }
  DLSCALE_CHECK(!all.empty(), "{}: no {}shard files in this directory", path,
                extension.empty() ? "" : extension + " ");
  if (train.empty() && test.empty()) {
    if (split != Split::kTrain) throw MissingSplit(fmt::format("{}: no val*/test* shards for the test split", path));
    return all;
  }
  const auto& chosen = split == Split::kTrain ? train : test;
  if (chosen.empty()) {
    throw MissingSplit(fmt::format("{}: no {} shards", path, split == Split::kTrain ? "train*" : "val*/test*"));
  }
  return chosen;
}

std::unique_ptr<Dataset> open_folder(const std::string& dir, Split split, int64_t channels) {
  std::error_code ec;
  DLSCALE_CHECK(fs::is_directory(dir, ec), "{}: no such directory", dir);
  fs::path root = dir;
  const bool has_splits = fs::is_directory(root / "train", ec) &&
                          (fs::is_directory(root / "val", ec) || fs::is_directory(root / "test", ec));
  if (has_splits) {
    root = split == Split::kTrain ? root / "train"
                                  : (fs::is_directory(root / "val", ec) ? root / "val" : root / "test");
  } else {
    if (split != Split::kTrain) throw MissingSplit(fmt::format("{}: no val/ or test/ folder for the test split", dir));
  }
  DatasetInfo info;
  info.format = "folder";
  info.location = dir;
  const std::vector<fs::path> classes = sorted_entries(root, true);
  DLSCALE_CHECK(!classes.empty(), "{}: no class folders (expected DIR/<class>/<image>)", root.string());
  for (const auto& cls : classes) {
    const uint32_t label = info.files.add_directory(cls.string());  // the class: its directory's index
    const size_t before = info.files.size();
    list_images(cls.string(), label, info.files);
    DLSCALE_CHECK(info.files.size() > before, "{}: empty class folder (no .jpg, .jpeg or .png files)",
                  cls.string());
  }
  info.num_classes = static_cast<int64_t>(classes.size());
  info.bytes = 0;  // not counted: it would take a stat of every file (data inspect counts them)
  return std::make_unique<FolderImages>(std::move(info), channels);
}

namespace {

DatasetInfo shard_info(const char* format, const std::string& path, Split split, const std::string& ext,
                       ShardPick pick) {
  DatasetInfo info;
  info.format = format;
  info.location = path;
  std::vector<std::string> all = shard_files(path, split, ext);
  info.shards = static_cast<int64_t>(all.size());
  check_shards_for_parts(info.shards, pick.of);
  for (size_t k = static_cast<size_t>(pick.part); k < all.size(); k += static_cast<size_t>(pick.of)) {
    info.files.push_back(std::move(all[k]));
  }
  return info;
}

/// The records of every shard of `info`, from their index sidecars where
/// those can be trusted (counted in info.indexed_shards), else by scanning
/// the shards (one line on stderr says how many and why, and how to index
/// them).
std::vector<Record> shard_records(DatasetInfo& info, const std::string& format) {
  std::vector<Record> records;
  int scanned = 0;
  std::string first_reason;
  for (size_t f = 0; f < info.files.size(); ++f) {
    std::string why;
    const std::vector<IndexEntry> entries = shard_entries(info.files[f], format, why);
    if (!why.empty() && scanned++ == 0) first_reason = info.files[f] + ": " + why;
    for (size_t k = 0; k < entries.size(); ++k) {
      const IndexEntry& e = entries[k];
      if (format == "wds") {
        records.push_back({static_cast<int32_t>(f), e.offset, e.size, e.label, 0, "sample " + e.key});
      } else {  // the payload, inside its framing
        records.push_back({static_cast<int32_t>(f), e.offset + kTfrecordHeaderBytes,
                           e.size - kTfrecordHeaderBytes - kTfrecordFooterBytes, e.label, static_cast<int64_t>(k),
                           fmt::format("record {}", k)});
      }
    }
  }
  info.indexed_shards = static_cast<int64_t>(info.files.size()) - scanned;
  if (scanned > 0) {
    std::cerr << fmt::format("dlscale: note: {} of {} shard(s) of {} have no valid index and were scanned ({}); "
                             "'dlscale data index {}' writes their indexes\n",
                             scanned, info.files.size(), info.location, first_reason, info.location);
  }
  return records;
}

}  // namespace

std::unique_ptr<Dataset> open_wds(const std::string& path, Split split, int64_t channels, ShardPick pick) {
  DatasetInfo info = shard_info("wds", path, split, ".tar", pick);
  std::vector<Record> records = shard_records(info, "wds");
  info.bytes = total_bytes(info.files);
  return std::make_unique<ShardImages>(std::move(info), std::move(records), Layout::kTar, channels);
}

std::unique_ptr<Dataset> open_tfrecord(const std::string& path, Split split, int64_t channels,
                                       ShardPick pick) {
  DatasetInfo info = shard_info("tfrecord", path, split, "", pick);
  std::vector<Record> records = shard_records(info, "tfrecord");
  info.bytes = total_bytes(info.files);
  return std::make_unique<ShardImages>(std::move(info), std::move(records), Layout::kTfRecord,
                                          channels);
}

}  // namespace dlscale::data
