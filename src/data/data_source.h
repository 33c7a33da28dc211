#pragma once
// Where a worker's batches come from. The trainer never names a concrete source.
#include <torch/torch.h>

#include <cstdint>
#include <string>

namespace dlscale::data {

/// One batch for one worker: inputs [b, c, h, w] float32 and labels [b] int64.
struct Batch {
  torch::Tensor inputs;
  torch::Tensor labels;
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
};

}  // namespace dlscale::data
