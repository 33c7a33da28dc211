#pragma once
// The data seam's factory: --data → an open Dataset (before the model is
// built, so it can shape it) → the DataSource a worker trains on.
#include <memory>

#include "data/data_options.h"
#include "libtorch/data/data_source.h"
#include "data/dataset.h"

namespace dlscale::data {

/// The data a run trains on, opened (and staged) but not yet sliced.
/// What the parts of a location opened with a ShardPick hold together: each
/// worker opens only its own, and the workers tell each other (the trainer
/// does, over its communicator).
struct PartsAgreement {
  int64_t samples = 0;           ///< over all parts
  int64_t bytes = 0;             ///< over all parts
  int64_t num_classes = 0;       ///< the largest part's class count (labels are 0..C−1 over all)
  int64_t image_size = 0;        ///< part 0's, which holds the location's first sample (as a whole open)
  int64_t smallest_samples = 0;  ///< the part with the fewest samples…
  int64_t smallest_part = 0;     ///< …and which it is
};

/// The agreement of parts (one DatasetInfo each, in part order: what each
/// worker opened).
PartsAgreement agree_parts(const std::vector<DatasetInfo>& parts);

/// A part's description as one line, for the workers to tell each other
/// (part_text), and read back (from_part_text: throws dlscale::Error naming
/// worker `rank` when the line is malformed).
std::string part_text(const DatasetInfo& part);
DatasetInfo from_part_text(const std::string& text, size_t rank);

/// `part`'s info with the counts and shape of the whole the parts agreed on.
DatasetInfo as_whole(DatasetInfo part, const PartsAgreement& parts);

struct OpenedData {
  DataSpec spec;
  std::shared_ptr<const Dataset> dataset;  ///< null for synthetic data
  ShardPick pick;                          ///< the part of the shards `dataset` holds
  PartsAgreement parts;                    ///< with a pick of several parts: the caller fills it
  double stage_seconds = 0;                ///< time spent copying to --stage-dir
  int64_t staged_bytes = 0;                ///< bytes copied (0 when already there)
};

/// Opens `options.spec`'s `split` (only `pick`'s shards), staging its files
/// first when asked. Encoded images are decoded to `channels`; raw pixels
/// (IDX) must have that many channels. Throws dlscale::Error naming the file
/// that is wrong.
OpenedData open_data(const DataOptions& options, int64_t channels, Split split, ShardPick pick = {});

struct SourceOptions {
  int64_t global_batch = 32;
  int64_t rank = 0;
  int64_t world_size = 1;
  int64_t channels = 3;
  int64_t image_size = 224;
  int64_t num_classes = 1000;
  uint64_t seed = 42;
  int64_t synthetic_batches = 1;  ///< synthetic only
  SampleFn synthetic;             ///< synthetic only: sample i of the stream (the model's task makes it;
                                  ///< for evaluation, its held-out sample i: Task::synthetic_test)
  /// Training (augmentation, the sampler's order) or evaluation (evaluation
  /// transform; every sample once per pass, split over ranks, shorter last batch).
  bool train = true;
  bool channels_last = false;
  torch::Device device = torch::kCPU;
};

/// The worker's source: for synthetic data SyntheticData (training) or
/// SyntheticTestData (evaluation: --synthetic-test samples) from
/// `source.synthetic`, else a Pipeline.
std::unique_ptr<DataSource> make_data_source(const OpenedData& data, const DataOptions& options,
                                             const SourceOptions& source);

/// The augmentation `auto` means for this data: crop-flip for raw pixels,
/// rrc-flip for encoded images, none for synthetic.
std::string resolve_augment(const DataOptions& options, const OpenedData& data);

}  // namespace dlscale::data
