#pragma once
// Synthetic data made once, like tf_cnn_benchmarks' synthetic mode: a small
// pool of batches generated at start and cycled, so that measured steps time
// the model, not data loading (the baseline of the I/O overhead). Unlike pure noise the task is learnable: each
// class has a fixed low-resolution pattern, upsampled to the image size and
// added to unit Gaussian noise, so a model's loss falls as it trains.
#include <cstdint>
#include <vector>

#include "data/data_source.h"

namespace dlscale::data {

struct SyntheticOptions {
  int64_t global_batch = 32;   ///< samples per step over all workers
  int64_t rank = 0;            ///< this worker's slice of each global batch
  int64_t world_size = 1;      ///< number of workers; must divide global_batch
  int64_t channels = 3;
  int64_t image_size = 224;    ///< height = width
  int64_t num_classes = 1000;
  int64_t pool_batches = 1;    ///< distinct global batches generated and cycled
  double signal = 1.0;         ///< amplitude of the class pattern relative to the noise
  uint64_t seed = 42;          ///< same seed ⇒ same data on every worker and run
  torch::Device device = torch::kCPU;
  bool channels_last = false;  ///< store inputs in NHWC memory order
};

/// Sample k of global batch i is generated from (seed, i·global_batch + k)
/// alone, and each worker makes only its contiguous slice [rank·b,
/// (rank+1)·b), so N workers together see exactly the samples that one worker
/// sees with the whole global batch, at 1/N of the cost each.
class SyntheticData : public DataSource {
 public:
  explicit SyntheticData(const SyntheticOptions& options);
  Batch batch(int64_t step) override;
  int64_t local_batch() const override { return local_batch_; }
  std::string name() const override { return "synthetic"; }

 private:
  int64_t local_batch_ = 0;
  std::vector<Batch> pool_;
};

}  // namespace dlscale::data
