#include "data/idx_dataset.h"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "core/files.h"

namespace dlscale::data {

namespace {

namespace fs = std::filesystem;

constexpr int64_t kMaxSide = 16384;
constexpr int64_t kMaxBytes = int64_t{1} << 34;  // 16 GiB of pixels

/// A gzip (or plain: zlib reads those through) file, closed on scope exit.
class GzFile {
 public:
  explicit GzFile(const std::string& path) : path_(path), file_(gzopen(path.c_str(), "rb")) {
    DLSCALE_CHECK(file_ != nullptr, "{}: cannot open: {}", path, std::strerror(errno));
  }
  ~GzFile() { gzclose(file_); }
  GzFile(const GzFile&) = delete;
  GzFile& operator=(const GzFile&) = delete;

  /// Reads exactly `n` bytes; throws naming the file when it ends early.
  void read(void* out, int64_t n, const char* what) {
    auto* p = static_cast<char*>(out);
    while (n > 0) {
      const auto chunk = static_cast<unsigned>(std::min<int64_t>(n, 1 << 30));
      const int got = gzread(file_, p, chunk);
      if (got < 0) {
        int code = 0;
        throw Error(fmt::format("{}: corrupt: {}", path_, gzerror(file_, &code)));
      }
      DLSCALE_CHECK(got > 0, "{}: truncated: the file ends inside the {}", path_, what);
      p += got;
      n -= got;
    }
  }
  /// Reads exactly `n` bytes into `out`, growing it as data arrives, so a
  /// header that claims more than the file holds costs no more memory than
  /// the file.
  void read_growing(std::vector<uint8_t>& out, int64_t n, const char* what) {
    constexpr int64_t kChunk = int64_t{64} << 20;
    out.clear();
    for (int64_t done = 0; done < n;) {
      const int64_t chunk = std::min(kChunk, n - done);
      out.resize(static_cast<size_t>(done + chunk));
      read(out.data() + done, chunk, what);
      done += chunk;
    }
  }
  bool at_end() {
    char c = 0;
    return gzread(file_, &c, 1) == 0;
  }

 private:
  std::string path_;
  gzFile file_;
};

uint32_t big_endian(const unsigned char* b) {
  return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | b[3];
}

/// Reads an IDX header of `dims` dimensions of unsigned bytes.
std::vector<int64_t> read_header(GzFile& f, const std::string& path, int dims) {
  unsigned char magic[4];
  f.read(magic, 4, "header");
  DLSCALE_CHECK(magic[0] == 0 && magic[1] == 0 && magic[2] == 0x08 && magic[3] == dims,
                "{}: not an IDX file of unsigned bytes with {} dimension(s) (magic {:02x}{:02x}"
                "{:02x}{:02x}, expected 000008{:02x})",
                path, dims, magic[0], magic[1], magic[2], magic[3], dims);
  std::vector<int64_t> sizes;
  for (int d = 0; d < dims; ++d) {
    unsigned char b[4];
    f.read(b, 4, "header");
    sizes.push_back(big_endian(b));
  }
  return sizes;
}

std::string find_file(const std::string& dir, const std::string& prefix, const std::string& kind) {
  for (const std::string& name : {prefix + "-" + kind + "-ubyte.gz", prefix + "-" + kind + "-ubyte",
                                  prefix + "." + kind + "-ubyte.gz", prefix + "." + kind + "-ubyte"}) {
    const fs::path p = fs::path(dir) / name;
    std::error_code ec;
    if (fs::is_regular_file(p, ec)) return p.string();
  }
  throw MissingSplit(fmt::format("{}: no {}-{}-ubyte[.gz] file in this directory", dir, prefix, kind));
}

class IdxDataset : public Dataset {
 public:
  IdxDataset(const std::string& dir, Split split);
  const DatasetInfo& info() const override { return info_; }
  int64_t label(int64_t index) const override { return labels_[static_cast<size_t>(index)]; }
  Image image(int64_t index) const override {
    Image img;
    img.height = img.width = side_;
    img.channels = 1;
    const auto* p = pixels_.data() + index * side_ * side_;
    img.pixels.assign(p, p + side_ * side_);
    return img;
  }
  std::string where(int64_t index) const override {
    return fmt::format("{} sample {}", info_.files[1], index);  // the labels file: what is checked
  }

 private:
  void load_images(const std::string& path);
  void load_labels(const std::string& path);
  DatasetInfo info_;
  int64_t side_ = 0;
  std::vector<uint8_t> pixels_;
  std::vector<uint8_t> labels_;
};

void IdxDataset::load_images(const std::string& path) {
  GzFile f(path);
  const std::vector<int64_t> dims = read_header(f, path, 3);
  DLSCALE_CHECK(dims[1] >= 1 && dims[1] <= kMaxSide && dims[1] == dims[2],
                "{}: images are {}x{}; square images of 1..{} pixels are supported", path, dims[1],
                dims[2], kMaxSide);
  DLSCALE_CHECK(dims[0] * dims[1] * dims[2] <= kMaxBytes, "{}: {} images of {}x{} exceed {} GiB",
                path, dims[0], dims[1], dims[2], kMaxBytes >> 30);
  side_ = dims[1];
  f.read_growing(pixels_, dims[0] * side_ * side_, "pixels");
  DLSCALE_CHECK(f.at_end(), "{}: unexpected bytes after {} images", path, dims[0]);
}

void IdxDataset::load_labels(const std::string& path) {
  GzFile f(path);
  const int64_t n = read_header(f, path, 1)[0];
  DLSCALE_CHECK(n <= kMaxBytes, "{}: {} labels are too many", path, n);
  f.read_growing(labels_, n, "labels");
  DLSCALE_CHECK(f.at_end(), "{}: unexpected bytes after {} labels", path, n);
}

/// Mean and standard deviation of every pixel of an IDX image file, in [0, 1].
void pixel_stats(const std::vector<uint8_t>& pixels, float& mean, float& stddev) {
  std::vector<int64_t> histogram(256, 0);
  for (uint8_t p : pixels) ++histogram[p];
  double sum = 0, sum_sq = 0;
  for (int v = 0; v < 256; ++v) {
    sum += static_cast<double>(histogram[v]) * v;
    sum_sq += static_cast<double>(histogram[v]) * v * v;
  }
  const double n = std::max<double>(1.0, static_cast<double>(pixels.size()));
  const double m = sum / n;
  mean = static_cast<float>(m / 255.0);
  stddev = static_cast<float>(std::sqrt(std::max(0.0, sum_sq / n - m * m)) / 255.0);
  if (stddev <= 0) stddev = 1;  // a constant image set: do not divide by zero
}

IdxDataset::IdxDataset(const std::string& dir, Split split) {
  std::error_code ec;
  DLSCALE_CHECK(fs::is_directory(dir, ec), "{}: no such directory", dir);
  const std::string prefix = split == Split::kTrain ? "train" : "t10k";
  const std::string images = find_file(dir, prefix, "images-idx3");
  const std::string labels = find_file(dir, prefix, "labels-idx1");
  load_images(images);
  load_labels(labels);
  const int64_t count = static_cast<int64_t>(pixels_.size()) / std::max<int64_t>(1, side_ * side_);
  DLSCALE_CHECK(count == static_cast<int64_t>(labels_.size()),
                "{} holds {} images but {} holds {} labels", images, count, labels,
                labels_.size());
  DLSCALE_CHECK(count > 0, "{}: holds no samples", images);
  info_.format = "idx";
  info_.location = dir;
  info_.size = count;
  info_.channels = 1;
  info_.image_size = side_;
  info_.num_classes = *std::max_element(labels_.begin(), labels_.end()) + 1;
  info_.files = {images, labels};
  info_.shard_starts = {0};
  for (const std::string f : info_.files) info_.bytes += static_cast<int64_t>(fs::file_size(f, ec));
  info_.mean.assign(1, 0.f);
  info_.std.assign(1, 1.f);
  if (split == Split::kTrain) {
    pixel_stats(pixels_, info_.mean[0], info_.std[0]);
  } else {  // normalise the test split with the training split's statistics
    IdxDataset train(dir, Split::kTrain);
    info_.mean = train.info().mean;
    info_.std = train.info().std;
  }
}

void write_bytes(const std::string& path, const std::string& header, const uint8_t* data,
                 size_t size) {
  std::string content = header;
  content.append(reinterpret_cast<const char*>(data), size);
  if (path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0) {
    uLongf bound = compressBound(static_cast<uLong>(content.size())) + 64;
    std::string out(bound, '\0');
    z_stream z{};
    // windowBits 15 + 16: write a gzip (not zlib) stream.
    DLSCALE_ASSERT(deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8,
                                Z_DEFAULT_STRATEGY) == Z_OK);
    z.next_in = reinterpret_cast<Bytef*>(content.data());
    z.avail_in = static_cast<uInt>(content.size());
    z.next_out = reinterpret_cast<Bytef*>(out.data());
    z.avail_out = static_cast<uInt>(out.size());
    const int rc = deflate(&z, Z_FINISH);
    out.resize(z.total_out);
    deflateEnd(&z);
    DLSCALE_ASSERT(rc == Z_STREAM_END);
    content = std::move(out);
  }
  write_file_atomic(path, content);
}

std::string be32(int64_t v) {
  const auto u = static_cast<uint32_t>(v);
  return {static_cast<char>(u >> 24), static_cast<char>(u >> 16), static_cast<char>(u >> 8),
          static_cast<char>(u)};
}

}  // namespace

std::unique_ptr<Dataset> open_idx(const std::string& dir, Split split) {
  return std::make_unique<IdxDataset>(dir, split);
}

void write_idx_images(const std::string& path, const std::vector<uint8_t>& pixels, int64_t count,
                      int64_t rows, int64_t cols) {
  DLSCALE_ASSERT(static_cast<int64_t>(pixels.size()) == count * rows * cols);
  write_bytes(path, std::string("\0\0\x08\x03", 4) + be32(count) + be32(rows) + be32(cols),
              pixels.data(), pixels.size());
}

void write_idx_labels(const std::string& path, const std::vector<uint8_t>& labels) {
  write_bytes(path, std::string("\0\0\x08\x01", 4) + be32(static_cast<int64_t>(labels.size())),
              labels.data(), labels.size());
}

}  // namespace dlscale::data
