#pragma once
// `dlscale data pack | index | inspect | verify` (docs/data.md, "Tools"). Torch-free.
#include <cstdint>
#include <ostream>
#include <string>

#include "data/data_options.h"

namespace dlscale::data {

/// Accepts a --data value or a bare path: a .tar file or a directory of them
/// is wds, a directory with *-idx3-ubyte[.gz] files is idx, one of
/// subfolders is folder, a file (or a directory with one) that starts with a
/// TFRecord header is tfrecord; anything else throws, asking for KIND:PATH.
DataSpec parse_data_location(const std::string& text);

struct PackOptions {
  std::string source;           ///< folder:DIR, idx:DIR, fashion-mnist or a bare path
  std::string destination;      ///< directory to create the shards in
  std::string format = "wds";   ///< wds | tfrecord
  int64_t shards = 1;           ///< shards per split
  int64_t resize = 0;           ///< > 0: shorter side to this, centre crop to a square
  std::string encoding = "auto";  ///< auto (png for raw pixels, jpeg for images) | jpeg | png
  int quality = 90;             ///< JPEG quality
  uint64_t seed = 42;           ///< samples are written in this seed's shuffled order
};

/// Writes every split the source has as `split-KKKKK-of-NNNNN[.tar]` shards
/// (split = train | validation), each atomically. Prints a progress line to
/// `progress` about every second. Returns the samples written.
int64_t pack_dataset(const PackOptions& options, std::ostream& progress);

/// Prints what a dataset holds: format, splits, samples, classes (with the
/// smallest and largest class), the first image's shape, files and shard
/// sizes.
void inspect_dataset(const std::string& location, std::ostream& out);

struct IndexOutcome {
  int64_t shards = 0;   ///< shards of the location
  int64_t written = 0;  ///< index sidecars written (the others were up to date)
  int64_t samples = 0;  ///< samples in all shards
};

/// Writes the index sidecar (data/shard_index.h) of every shard of a
/// WebDataset or TFRecord location (a file, or a directory: every split)
/// that has none it can trust; with `force`, of every shard. Prints
/// progress to `progress`. Throws dlscale::Error naming a corrupt shard.
IndexOutcome index_location(const std::string& location, bool force, std::ostream& progress);

/// Reads and decodes every sample of every split (TFRecord data CRCs
/// included), and checks every trusted index sidecar against its shard.
/// Throws dlscale::Error naming the first corrupt file and record; returns
/// the samples checked. Prints progress to `progress`.
int64_t verify_dataset(const std::string& location, std::ostream& progress);

}  // namespace dlscale::data
