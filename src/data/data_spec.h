#pragma once
// The data seam's factory: --data → an open Dataset (before the model is
// built, so it can shape it) → the DataSource a worker trains on.
#include <memory>

#include "data/data_options.h"
#include "data/data_source.h"
#include "data/dataset.h"

namespace dlscale::data {

/// The data a run trains on, opened (and staged) but not yet sliced.
struct OpenedData {
  DataSpec spec;
  std::shared_ptr<const Dataset> dataset;  ///< null for synthetic data
  double stage_seconds = 0;                ///< time spent copying to --stage-dir
  int64_t staged_bytes = 0;                ///< bytes copied (0 when already there)
};

/// Opens `options.spec`'s `split`, staging its files first when asked.
/// Encoded images are decoded to `channels`; raw pixels (IDX) must have that
/// many channels. Throws dlscale::Error naming the file that is wrong.
OpenedData open_data(const DataOptions& options, int64_t channels, Split split);

struct SourceOptions {
  int64_t global_batch = 32;
  int64_t rank = 0;
  int64_t world_size = 1;
  int64_t channels = 3;
  int64_t image_size = 224;
  int64_t num_classes = 1000;
  uint64_t seed = 42;
  int64_t synthetic_batches = 1;  ///< synthetic only
  SampleFn synthetic;             ///< synthetic only: sample i of the stream (the model's task makes it)
  /// Training (augmentation, the sampler's order) or evaluation (evaluation
  /// transform; every sample once per pass, split over ranks, shorter last batch).
  bool train = true;
  bool channels_last = false;
  torch::Device device = torch::kCPU;
};

/// The worker's source: SyntheticData (from `source.synthetic`) for synthetic, else a Pipeline.
std::unique_ptr<DataSource> make_data_source(const OpenedData& data, const DataOptions& options,
                                             const SourceOptions& source);

/// The augmentation `auto` means for this data: crop-flip for raw pixels,
/// rrc-flip for encoded images, none for synthetic.
std::string resolve_augment(const DataOptions& options, const OpenedData& data);

}  // namespace dlscale::data
