#pragma once
// Datasets of encoded images (JPEG/PNG), one opener per layout: an image
// folder (torchvision's ImageFolder), WebDataset tar shards and TFRecord
// shards of tf.train.Example (tf_cnn_benchmarks' ImageNet layout). Each
// decodes to `channels` (1 or 3; 0 = as the first image is stored).
#include <memory>
#include <string>

#include "data/dataset.h"

namespace dlscale::data {

/// DIR/<class>/<image>.{jpg,jpeg,png} (classes sorted by name → labels 0..C−1,
/// files sorted). With DIR/train and DIR/val (or DIR/test) subfolders those
/// are the splits; otherwise DIR is the training split.
std::unique_ptr<Dataset> open_folder(const std::string& dir, Split split, int64_t channels);

/// A .tar file, or every *.tar in a directory (sorted; files named train*
/// resp. val*/test* form the splits when present). Each sample is a key with
/// a .jpg/.jpeg/.png and a .cls (decimal label) member. `pick`: only those
/// shards are opened (open_dataset).
std::unique_ptr<Dataset> open_wds(const std::string& path, Split split, int64_t channels, ShardPick pick = {});

/// A TFRecord file, or every regular file in a directory (sorted; files named
/// train* resp. validation*/val*/test* form the splits when present). Every
/// record's place and label come from the shard's index sidecar, or from a
/// read of the whole shard when it has no valid one; its data CRC is checked
/// when the sample is read.
std::unique_ptr<Dataset> open_tfrecord(const std::string& path, Split split, int64_t channels,
                                       ShardPick pick = {});

/// The data files of a shard location for `split` (for pack, inspect, verify).
std::vector<std::string> shard_files(const std::string& path, Split split,
                                     const std::string& extension);

}  // namespace dlscale::data
