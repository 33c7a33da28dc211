#pragma once
// Small datasets written by the tests themselves (CI downloads nothing).
#include <filesystem>
#include <string>
#include <vector>

#include "core/files.h"
#include "data/idx_dataset.h"
#include "data/image_codec.h"
#include "process_util.h"

namespace dlscale::testing {

/// Pixel (i, y, x) of the test IDX images: a function of the sample and the
/// position, so a reader that swaps, shifts or drops bytes is caught.
inline uint8_t idx_pixel(int64_t i, int64_t y, int64_t x) {
  return static_cast<uint8_t>((i * 37 + y * 11 + x * 3 + (i % 10) * 20) % 256);
}
inline uint8_t idx_label(int64_t i) { return static_cast<uint8_t>((i * 7) % 10); }

/// Writes a side x side RGB PNG at `path` whose bytes are a function of
/// `k` and the position.
inline void write_test_png(const std::string& path, int64_t side, int64_t k) {
  data::Image img;
  img.height = img.width = side;
  img.channels = 3;
  for (int64_t p = 0; p < side * side * 3; ++p) img.pixels.push_back(static_cast<uint8_t>((p * 5 + k * 30) % 256));
  const std::vector<uint8_t> png = data::encode_png(img);
  write_file_atomic(path, std::string(png.begin(), png.end()));
}

/// Writes train (n_train) and t10k (n_test) IDX files of side × side images
/// into a new directory; gzip-compressed when `gz`. Returns the directory.
inline std::string write_idx_dataset(int64_t n_train, int64_t n_test, int64_t side, bool gz) {
  const std::string dir = temp_path("idx");
  // Nothing else may share the directory: the reader prefers .gz files.
  dlscale::remove_tree(dir);
  std::filesystem::create_directories(dir);
  const std::string ext = gz ? ".gz" : "";
  for (const auto& [prefix, n, offset] :
       {std::tuple{"train", n_train, int64_t{0}}, std::tuple{"t10k", n_test, int64_t{100000}}}) {
    std::vector<uint8_t> pixels, labels;
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t y = 0; y < side; ++y) {
        for (int64_t x = 0; x < side; ++x) pixels.push_back(idx_pixel(i + offset, y, x));
      }
      labels.push_back(idx_label(i + offset));
    }
    data::write_idx_images(dir + "/" + prefix + "-images-idx3-ubyte" + ext, pixels, n, side, side);
    data::write_idx_labels(dir + "/" + prefix + "-labels-idx1-ubyte" + ext, labels);
  }
  return dir;
}

}  // namespace dlscale::testing
