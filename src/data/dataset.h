#pragma once
// A dataset on disk, read by index (docs/data.md). Each format is one file
// behind this interface; open_dataset() (libtorch/data/data_spec.h) is the factory.
// No LibTorch here: readers, packers and the fuzzers use it alone.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "data/data_options.h"
#include "data/file_list.h"
#include "data/image_codec.h"

namespace dlscale::data {

/// Which part of a dataset to read.
enum class Split { kTrain, kTest };
std::string to_string(Split split);

/// The data is there but has no files for the split asked for (a dataset
/// without a test split). Callers that probe for a split catch this type;
/// anything else wrong with the data stays a plain dlscale::Error.
class MissingSplit : public Error {
 public:
  using Error::Error;
};

/// A shard's record differs from what its index sidecar says (its label or
/// length): the shard was rewritten after indexing, keeping its size and
/// mtime. Never skipped as a corrupt sample (--skip-corrupt): every sample's
/// label may be wrong.
class StaleIndex : public Error {
 public:
  using Error::Error;
};

/// Which shards of a location to open: shard k of the split (its files
/// sorted) belongs to part k mod `of`, and only part `part`'s are opened
/// (--data-order streaming: each worker opens only its own shards).
/// {0, 1}: all of them.
struct ShardPick {
  int64_t part = 0;
  int64_t of = 1;
};

/// What a dataset holds, known once it is open.
struct DatasetInfo {
  std::string format;           ///< "idx" | "folder" | "wds" | "tfrecord"
  std::string location;         ///< the directory or files it was opened from
  int64_t size = 0;             ///< samples
  int64_t channels = 0;         ///< 1 or 3 (encoded images: what the model asked for)
  int64_t image_size = 0;       ///< height = width when every sample has it; 0 = varies
  int64_t num_classes = 0;      ///< labels are in [0, num_classes)
  bool encoded = false;         ///< samples are JPEG/PNG to decode (false: raw pixels)
  std::vector<float> mean;      ///< per-channel normalisation, in [0, 1] pixel units
  std::vector<float> std;
  FileList files;               ///< the data files opened (shards, or a folder's images), for staging and reports
  int64_t shards = 1;           ///< the split's shards, those a ShardPick left out included
  std::vector<int64_t> shard_starts;  ///< first sample of each shard ({0}: one shard)
  int64_t bytes = 0;            ///< total bytes of those files
  int64_t indexed_shards = 0;   ///< shards opened from a trusted index sidecar (the rest were scanned)
};

/// Random access to decoded samples. image() and label() are thread-safe.
class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual const DatasetInfo& info() const = 0;
  virtual int64_t label(int64_t index) const = 0;
  /// The decoded sample `index`, HWC uint8 with info().channels channels.
  /// Throws dlscale::Error naming the file (and record) when it is corrupt.
  virtual Image image(int64_t index) const = 0;
  /// The part of sample `index` that `plan` asks for, given its stored
  /// size, where its format allows it (JPEG; decode_image_part), else the
  /// whole sample. By default: image(), whole.
  virtual DecodedPart image_part(int64_t index, const DecodePlan& /*plan*/) const {
    DecodedPart part;
    part.image = image(index);
    return part;
  }
  /// Where sample `index` lives, for error messages ("FILE record K").
  virtual std::string where(int64_t index) const = 0;
};

/// Throws the streaming order's dlscale::Error when `shards` cannot give
/// each of `parts` workers at least one of its own.
void check_shards_for_parts(int64_t shards, int64_t parts);

/// ImageNet's per-channel mean and std (torchvision's constants), for
/// encoded-image datasets; `channels` 1 gives their luminance-weighted mean.
void imagenet_normalisation(int64_t channels, std::vector<float>& mean, std::vector<float>& std);

/// Opens a dataset from a parsed spec (not synthetic). Encoded images are
/// decoded to `channels` (0: as stored); raw pixels (IDX) must have that many. Throws
/// dlscale::Error naming the file that is wrong. `pick` opens only some of
/// a record location's shards; a one-shard format (IDX, an image folder) or a
/// location with fewer shards than parts is refused.
std::unique_ptr<Dataset> open_dataset(const DataSpec& spec, Split split, int64_t channels,
                                      ShardPick pick = {});

/// Checks every label of `dataset` against its class count; throws
/// dlscale::Error naming the first sample outside [0, classes).
void check_labels(const Dataset& dataset, int64_t classes);

}  // namespace dlscale::data
