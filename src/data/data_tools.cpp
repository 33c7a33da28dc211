#include "data/data_tools.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include "core/clock.h"
#include "core/error.h"
#include "core/files.h"
#include "data/data_format.h"
#include "data/dataset.h"
#include "data/encoded_dataset.h"
#include "data/sampler.h"
#include "data/shard_index.h"
#include "data/tar_shards.h"
#include "data/tfrecord.h"
#include "data/transforms.h"

namespace dlscale::data {

namespace {

namespace fs = std::filesystem;

/// The formats with `what` set, as errors describe them: "IDX files or
/// class subdirectories".
template <typename T>
std::string described(T DataFormat::*what) {
  std::vector<std::string> names;
  for (const DataFormat& f : data_formats()) {
    if (f.*what) names.emplace_back(f.on_disk);
  }
  std::string text;
  for (size_t i = 0; i < names.size(); ++i) text += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return text;
}

/// The splits a location has (train always; test when it opens).
std::vector<std::pair<Split, std::unique_ptr<Dataset>>> open_splits(const DataSpec& spec) {
  std::vector<std::pair<Split, std::unique_ptr<Dataset>>> out;
  // Channels 0: as stored.
  out.emplace_back(Split::kTrain, open_dataset(spec, Split::kTrain, 0));
  try {
    out.emplace_back(Split::kTest, open_dataset(spec, Split::kTest, 0));
  } catch (const MissingSplit&) {
    // No test split is normal; a corrupt one (any other Error) is not.
  }
  return out;
}

/// Prints a progress line about once a second, and the last one always.
class Progress {
 public:
  Progress(std::ostream& out, std::string what, int64_t total, std::string unit = "samples")
      : out_(out), what_(std::move(what)), unit_(std::move(unit)), total_(total), start_(now_seconds()) {}
  void update(int64_t done) {
    const double now = now_seconds();
    if (done < total_ && now - last_ < 1.0) return;
    last_ = now;
    const double rate = done / std::max(1e-9, now - start_);
    out_ << fmt::format("{}: {}/{} {} ({:.0f}/s)\n", what_, done, total_, unit_, rate);
    out_.flush();
  }

 private:
  std::ostream& out_;
  std::string what_;
  std::string unit_;
  int64_t total_;
  double start_;
  double last_ = 0;
};

Image pack_geometry(const Image& image, int64_t resize) {
  if (resize <= 0) return image;
  const double side = static_cast<double>(std::min(image.height, image.width));
  return resize_region(image, (image.width - side) / 2, (image.height - side) / 2, side, side,
                       resize, resize);
}

std::string encode(const Image& image, const std::string& encoding, int quality) {
  const std::vector<uint8_t> bytes = encoding == "png" ? encode_png(image) : encode_jpeg(image, quality);
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

std::string shard_name(const std::string& split, int64_t k, int64_t n, const std::string& format) {
  return fmt::format("{}-{:05d}-of-{:05d}{}", split, k, n, format == "wds" ? ".tar" : "");
}

/// One shard being packed: each sample goes straight to the shard's
/// temporary file (memory does not grow with the shard), its index entry is
/// kept, and finish() renames the shard and writes its index sidecar.
class PackedShard {
 public:
  PackedShard(std::string path, std::string format) : path_(std::move(path)), format_(std::move(format)) {
    if (format_ == "wds") {
      tar_ = std::make_unique<TarWriter>(path_);
    } else {
      file_ = std::make_unique<AtomicFileWriter>(path_);
    }
  }

  void add(const std::string& key, const std::string& encoding, const std::string& image, int64_t label) {
    if (tar_) {
      const uint64_t offset = tar_->add(key + "." + (encoding == "png" ? "png" : "jpg"), image);
      tar_->add(key + ".cls", std::to_string(label));
      entries_.push_back({offset, image.size(), label, key});
      return;
    }
    std::string framed;
    append_tfrecord(framed, encode_example(image, label, encoding == "png" ? "PNG" : "JPEG"));
    entries_.push_back({file_->size(), framed.size(), label, ""});
    file_->write(framed);
  }

  void finish() {
    if (tar_) {
      tar_->finish();
    } else {
      file_->commit();
    }
    write_index(path_, stamped_index(path_, format_, std::move(entries_)));
  }

 private:
  std::string path_;
  std::string format_;
  std::unique_ptr<TarWriter> tar_;
  std::unique_ptr<AtomicFileWriter> file_;
  std::vector<IndexEntry> entries_;
};

/// Packs one split into options.shards shards; returns samples written.
int64_t pack_split(const Dataset& d, Split split, const PackOptions& o, const std::string& encoding,
                   std::ostream& progress) {
  const int64_t n = d.info().size;
  const std::string split_name = split == Split::kTrain ? "train" : "validation";
  SamplerOptions so;
  so.dataset_size = n;
  so.global_batch = n;
  so.seed = o.seed;
  GlobalSampler order(so);
  const std::vector<int64_t> indices = order.indices(0, 0, n);
  const int64_t shards = std::min(o.shards, n);
  Progress bar(progress, "pack " + split_name, n);
  int64_t written = 0;
  for (int64_t k = 0; k < shards; ++k) {
    const int64_t begin = n * k / shards, end = n * (k + 1) / shards;
    const std::string path =
        (fs::path(o.destination) / shard_name(split_name, k, shards, o.format)).string();
    PackedShard shard(path, o.format);
    for (int64_t i = begin; i < end; ++i) {
      const int64_t index = indices[static_cast<size_t>(i)];
      const std::string image = encode(pack_geometry(d.image(index), o.resize), encoding, o.quality);
      shard.add(fmt::format("{:08d}", index), encoding, image, d.label(index));
      bar.update(++written);
    }
    shard.finish();
  }
  return written;
}

}  // namespace

DataSpec parse_data_location(const std::string& text) {
  if (text == "synthetic") throw Error("synthetic data has nothing on disk to read");
  if (text == "fashion-mnist" || text.find(':') != std::string::npos) {
    const DataSpec spec = parse_data_spec(text);
    if (spec.kind != "synthetic") return spec;
  }
  std::error_code ec;
  const fs::path p(text);
  DLSCALE_CHECK(fs::exists(p, ec), "{}: no such file or directory", text);
  const std::string unknown = fmt::format("{}: not data of a kind dlscale recognises ({}); name its kind, e.g. tfrecord:{}",
                                          text, described(&DataFormat::kind), text);
  if (fs::is_regular_file(p, ec)) {
    for (const DataFormat& f : data_formats()) {
      if (f.file_location && f.recognises(p)) return {f.kind, text};
    }
    throw Error(unknown);
  }
  std::vector<fs::path> entries;
  for (const auto& e : fs::directory_iterator(p, ec)) entries.push_back(e.path());
  for (const DataFormat& f : data_formats()) {
    if (std::any_of(entries.begin(), entries.end(), f.recognises)) return {f.kind, text};
  }
  throw Error(unknown);
}

int64_t pack_dataset(const PackOptions& o, std::ostream& progress) {
  DLSCALE_CHECK(o.format == "wds" || o.format == "tfrecord",
                "--format must be wds or tfrecord (got '{}')", o.format);
  DLSCALE_CHECK(o.shards >= 1 && o.shards <= 100000, "--shards must be in [1, 100000] (got {})",
                o.shards);
  DLSCALE_CHECK(o.resize >= 0 && o.resize <= kMaxImageSide, "--resize must be in [0, {}] (got {})",
                kMaxImageSide, o.resize);
  DLSCALE_CHECK(o.quality >= 1 && o.quality <= 100, "--quality must be in [1, 100] (got {})",
                o.quality);
  DLSCALE_CHECK(o.encoding == "auto" || o.encoding == "jpeg" || o.encoding == "png",
                "--encoding must be auto, jpeg or png (got '{}')", o.encoding);
  const DataSpec spec = parse_data_location(o.source);
  const DataFormat& format = data_format(spec.kind);
  DLSCALE_CHECK(format.pack_encoding != nullptr, "data pack reads {} (got {} data: {})",
                described(&DataFormat::pack_encoding), spec.kind, o.source);
  const std::string encoding = o.encoding != "auto" ? o.encoding : format.pack_encoding;
  const auto splits = open_splits(spec);  // every input checked before anything is written
  std::error_code ec;
  fs::create_directories(o.destination, ec);
  DLSCALE_CHECK(fs::is_directory(o.destination, ec), "{}: cannot create the directory{}",
                o.destination, ec ? ": " + ec.message() : "");
  // Shards of an earlier pack with another shard count would be read with
  // these as one dataset: refuse rather than mix them.
  std::set<std::string> planned;
  for (const auto& [split, dataset] : splits) {
    const int64_t shards = std::min(o.shards, dataset->info().size);
    for (int64_t k = 0; k < shards; ++k) {
      const std::string name = shard_name(split == Split::kTrain ? "train" : "validation", k, shards, o.format);
      planned.insert(name);
      planned.insert(name + kIndexSuffix);
    }
  }
  for (const auto& e : fs::directory_iterator(o.destination, ec)) {
    const std::string name = e.path().filename().string();
    // A temporary of a pack killed mid-write is not read as data; left alone
    // (another pack may be writing it).
    const bool shard_like = (name.rfind("train", 0) == 0 || name.rfind("val", 0) == 0 ||
                             name.rfind("test", 0) == 0) &&
                            !is_atomic_temporary(name);
    DLSCALE_CHECK(!shard_like || planned.count(name) != 0,
                  "{}: already holds {}, which this pack would not replace (readers would mix both); "
                  "remove it or pack into an empty directory",
                  o.destination, name);
  }
  int64_t total = 0;
  for (const auto& [split, dataset] : splits) total += pack_split(*dataset, split, o, encoding, progress);
  return total;
}

void inspect_dataset(const std::string& location, std::ostream& out) {
  const DataSpec spec = parse_data_location(location);
  out << fmt::format("{} ({})\n", spec.text(), spec.kind);
  for (const auto& [split, d] : open_splits(spec)) {
    const DatasetInfo& info = d->info();
    std::map<int64_t, int64_t> per_class;
    for (int64_t i = 0; i < info.size; ++i) ++per_class[d->label(i)];
    int64_t smallest = info.size, largest = 0;
    for (const auto& [label, count] : per_class) {
      smallest = std::min(smallest, count);
      largest = std::max(largest, count);
    }
    const Image first = d->image(0);
    out << fmt::format("  {}: {} samples, {} classes (labels 0..{}; {} to {} per class), first "
                       "image {}x{}x{}\n",
                       to_string(split), info.size, per_class.size(), info.num_classes - 1,
                       smallest, largest, first.channels, first.height, first.width);
    int64_t min_file = -1, max_file = 0, bytes = 0;  // an image folder's were not counted at open
    for (const std::string f : info.files) {
      const auto size = static_cast<int64_t>(fs::file_size(f));
      min_file = min_file < 0 ? size : std::min(min_file, size);
      max_file = std::max(max_file, size);
      bytes += size;
    }
    out << fmt::format("  {}: {} file(s), {:.2f} MB ({:.2f} to {:.2f} MB per file)\n",
                       to_string(split), info.files.size(), bytes / 1e6, min_file / 1e6,
                       max_file / 1e6);
    if (data_format(spec.kind).record_shards) {  // counted when the shards were opened
      const auto shards = static_cast<int64_t>(info.files.size());
      out << fmt::format("  {}: {} of {} shard(s) indexed{}\n", to_string(split), info.indexed_shards, shards,
                         info.indexed_shards < shards ? " ('dlscale data index' writes the rest)" : "");
    }
  }
}

namespace {

/// Every shard of a WebDataset or TFRecord location, all splits; `format`
/// gets which.
std::vector<std::string> indexable_shards(const std::string& location, std::string& format) {
  const DataSpec spec = parse_data_location(location);
  const DataFormat& data = data_format(spec.kind);
  DLSCALE_CHECK(data.record_shards, "data index reads the shards of {} (got {} data: {})",
                described(&DataFormat::record_shards), spec.kind, location);
  format = spec.kind;
  std::vector<std::string> shards;
  for (const Split split : {Split::kTrain, Split::kTest}) {
    try {
      for (const auto& f : shard_files(spec.path, split, data.shard_suffix)) {
        if (std::find(shards.begin(), shards.end(), f) == shards.end()) shards.push_back(f);
      }
    } catch (const MissingSplit&) {
    }
  }
  return shards;
}

}  // namespace

IndexOutcome index_location(const std::string& location, bool force, std::ostream& progress) {
  std::string format;
  const std::vector<std::string> shards = indexable_shards(location, format);
  IndexOutcome outcome;
  Progress bar(progress, "index", static_cast<int64_t>(shards.size()), "shards");
  for (const std::string& shard : shards) {
    std::string why;
    std::optional<ShardIndex> index = force ? std::nullopt : load_index(shard, format, why);
    if (!index) {
      index = scan_shard(shard, format);
      write_index(shard, *index);
      ++outcome.written;
    }
    outcome.samples += static_cast<int64_t>(index->entries.size());
    bar.update(++outcome.shards);
  }
  return outcome;
}

namespace {

/// A shard's trusted index must list what a scan of the shard finds.
void verify_index(const std::string& shard, const std::string& format, std::ostream& progress) {
  std::string why;
  const std::optional<ShardIndex> index = load_index(shard, format, why);
  if (!index) {
    if (why != "no index") progress << fmt::format("verify: {}: index not used ({})\n", shard, why);
    return;
  }
  const ShardIndex scanned = scan_shard(shard, format);
  for (size_t k = 0; k < std::max(index->entries.size(), scanned.entries.size()); ++k) {
    const bool same = k < index->entries.size() && k < scanned.entries.size() &&
                      index->entries[k].offset == scanned.entries[k].offset &&
                      index->entries[k].size == scanned.entries[k].size &&
                      index->entries[k].label == scanned.entries[k].label &&
                      index->entries[k].key == scanned.entries[k].key;
    DLSCALE_CHECK(same, "{}: sample {} differs from the shard; rewrite it with 'dlscale data index --force'",
                  index_path(shard), k);
  }
}

}  // namespace

int64_t verify_dataset(const std::string& location, std::ostream& progress) {
  const DataSpec spec = parse_data_location(location);
  int64_t checked = 0;
  for (const auto& [split, d] : open_splits(spec)) {
    const DataFormat& format = data_format(spec.kind);
    if (format.verify_file != nullptr) {
      for (const std::string f : d->info().files) format.verify_file(f);
    }
    if (format.record_shards) {
      for (const std::string f : d->info().files) verify_index(f, spec.kind, progress);
    }
    Progress bar(progress, "verify " + to_string(split), d->info().size);
    for (int64_t i = 0; i < d->info().size; ++i, ++checked) {
      const Image image = d->image(i);
      DLSCALE_CHECK(image.height > 0 && image.width > 0, "{}: an empty image", d->where(i));
      DLSCALE_CHECK(d->label(i) >= 0, "{}: negative label {}", d->where(i), d->label(i));
      bar.update(i + 1);
    }
  }
  return checked;
}

}  // namespace dlscale::data
