#pragma once
// Where a worker's batches come from. The trainer never names a concrete
// source: data/data_spec.h opens one from the user's --data.
#include <torch/torch.h>

#include <cstdint>
#include <string>

namespace dlscale::data {

/// One batch for one worker: inputs [b, c, h, w] float32 and labels [b] int64.
struct Batch {
  torch::Tensor inputs;
  torch::Tensor labels;
};

/// What a source's own threads did so far (zero for sources without any).
struct PipelineStats {
  double busy_seconds = 0;   ///< wall time spent building batches (read, decode, transform)
  int64_t batches = 0;       ///< batches built
  int64_t samples = 0;       ///< samples read and transformed
  int64_t skipped = 0;       ///< corrupt samples replaced (--skip-corrupt)
  int64_t cache_hits = 0;    ///< samples served decoded from --cache
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
  /// Global batches per epoch (0: not a finite dataset).
  virtual int64_t steps_per_epoch() const { return 0; }
  /// Counters of the source's pipeline (thread-safe).
  virtual PipelineStats stats() const { return {}; }
};

}  // namespace dlscale::data
