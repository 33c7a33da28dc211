#pragma once
// MNIST-family IDX files (LeCun's format: big-endian header, raw uint8
// pixels), gzip-compressed or not: MNIST, Fashion-MNIST, KMNIST, EMNIST.
#include <memory>
#include <string>

#include "data/dataset.h"

namespace dlscale::data {

/// Opens the `split` of the IDX dataset in `dir`: train-images-idx3-ubyte and
/// train-labels-idx1-ubyte (t10k-* for the test split), each optionally
/// ending in .gz (or named *.idx3-ubyte). Everything is read and checked here
/// (magic numbers, counts, truncation) and held in memory. Normalisation is
/// the train split's per-channel pixel mean and std. Throws dlscale::Error
/// naming the file.
std::unique_ptr<Dataset> open_idx(const std::string& dir, Split split);

/// Writes `images` (n × rows × cols uint8) and `labels` as IDX files
/// (gzip-compressed when the name ends in .gz). For tests and tools.
void write_idx_images(const std::string& path, const std::vector<uint8_t>& pixels, int64_t count,
                      int64_t rows, int64_t cols);
void write_idx_labels(const std::string& path, const std::vector<uint8_t>& labels);

}  // namespace dlscale::data
