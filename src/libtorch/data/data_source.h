#pragma once
// Where a worker's batches come from. The trainer never names a concrete
// source: libtorch/data/data_spec.h opens one from the user's --data.
#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace dlscale::data {

/// Named tensors: a batch's inputs or targets, a model's inputs.
using TensorMap = std::map<std::string, torch::Tensor>;

/// The names image datasets give their tensors (libtorch/models/task.h's image
/// classification reads them): "image" [b, c, h, w] float32, "label" [b] int64.
inline constexpr const char* kImage = "image";
inline constexpr const char* kLabel = "label";

/// One batch for one worker: what the model reads and what its loss compares
/// the outputs with; every tensor's first dimension is the batch.
struct Batch {
  TensorMap inputs;
  TensorMap targets;
  /// Samples in the batch (the first dimension of its first input).
  int64_t size() const { return inputs.empty() ? 0 : inputs.begin()->second.size(0); }
};

/// One sample (no batch dimension), as a synthetic generator makes it.
struct Sample {
  TensorMap inputs;
  TensorMap targets;
};

/// Sample `index` of a synthetic stream, made from its seed and the index alone.
using SampleFn = std::function<Sample(uint64_t index)>;

/// The tensors a source's batches hold, by name.
struct Provides {
  std::vector<std::string> inputs;
  std::vector<std::string> targets;
};

/// What a source's own threads did so far (zero for sources without any).
struct PipelineStats {
  double busy_seconds = 0;   ///< wall time spent building batches (read, decode, transform)
  int64_t batches = 0;       ///< batches built
  int64_t samples = 0;       ///< samples read and transformed
  int64_t skipped = 0;       ///< corrupt samples replaced (--skip-corrupt)
  int64_t cache_hits = 0;    ///< samples served decoded from --cache
  int64_t cache_bytes = 0;   ///< decoded pixels --cache holds
  int64_t cache_full = 0;    ///< samples decoded but not kept: --cache-mb was reached
  int64_t reduced_decodes = 0;  ///< JPEGs decoded at 1/2, 1/4 or 1/8 of their size
  int64_t region_decodes = 0;   ///< JPEGs decoded only in the part their crop covers
};

class DataSource {
 public:
  virtual ~DataSource() = default;
  /// The batch this worker trains on at `step` (0-based). The returned
  /// tensors stay valid until the next call.
  virtual Batch batch(int64_t step) = 0;
  /// Samples per batch on this worker.
  virtual int64_t local_batch() const = 0;
  /// Short description for headers and result records, e.g. "synthetic".
  virtual std::string name() const = 0;
  /// The inputs and targets of its batches (images and labels by default).
  virtual Provides provides() const { return {{kImage}, {kLabel}}; }
  /// Global batches per epoch (0: not a finite dataset).
  virtual int64_t steps_per_epoch() const { return 0; }
  /// Counters of the source's pipeline (thread-safe).
  virtual PipelineStats stats() const { return {}; }
};

}  // namespace dlscale::data
