// libFuzzer harness: the IDX reader (MNIST-family files, gzip or not) on
// files it did not write. The input's first byte picks where to split the
// rest into an images file and a labels file; the second picks whether the
// images file is gzip-compressed by the harness, so both the raw and the
// zlib paths see hostile bytes. open_idx must return a dataset whose every
// sample lies inside what was read, or throw dlscale::Error.
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"
#include "core/files.h"
#include "data/idx_dataset.h"

namespace {

/// The files the reader opens, in a directory of their own that is removed
/// when the fuzzer exits (libFuzzer returns through exit() after -runs=N).
const std::string& scratch_dir() {
  struct Dir {
    std::string path =
        (std::filesystem::temp_directory_path() / "dlscale_fuzz_idx_XXXXXX").string();
    Dir() {
      if (::mkdtemp(path.data()) == nullptr) std::abort();
    }
    ~Dir() { dlscale::remove_tree(path); }
  };
  static const Dir dir;
  return dir.path;
}

void write(const std::string& path, const std::string& bytes, bool gz) {
  std::filesystem::remove(path);
  std::filesystem::remove(path + ".gz");
  if (gz) {
    gzFile f = gzopen((path + ".gz").c_str(), "wb");
    if (f == nullptr) std::abort();
    if (!bytes.empty()) gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
    gzclose(f);
    return;
  }
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const std::string rest(reinterpret_cast<const char*>(data) + 2, size - 2);
  const size_t cut = rest.size() * data[0] / 255;
  const std::string& dir = scratch_dir();
  write(dir + "/train-images-idx3-ubyte", rest.substr(0, cut), (data[1] & 1) != 0);
  write(dir + "/train-labels-idx1-ubyte", rest.substr(cut), (data[1] & 2) != 0);
  try {
    const auto d = dlscale::data::open_idx(dir, dlscale::data::Split::kTrain);
    const auto& info = d->info();
    if (info.size < 1 || info.channels != 1 || info.num_classes < 1) std::abort();
    const int64_t last = info.size - 1;
    const auto image = d->image(last);
    if (static_cast<int64_t>(image.pixels.size()) != info.image_size * info.image_size) std::abort();
    if (d->label(last) < 0 || d->label(last) >= info.num_classes) std::abort();
  } catch (const dlscale::Error&) {
  }
  return 0;
}
