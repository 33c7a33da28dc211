#pragma once
// Synthetic data made once, like tf_cnn_benchmarks' synthetic mode: a small
// pool of batches generated at start and cycled, so that measured steps time
// the model, not data loading (the baseline of the I/O overhead). What a
// sample holds comes from the model's task (libtorch/models/task.h): for image
// classification, a learnable class pattern in Gaussian noise.
#include <cstdint>
#include <vector>

#include "libtorch/data/data_source.h"
#include "data/sampler.h"

namespace dlscale::data {

struct SyntheticOptions {
  int64_t global_batch = 32;   ///< samples per step over all workers
  int64_t rank = 0;            ///< this worker's slice of each global batch
  int64_t world_size = 1;      ///< number of workers; must divide global_batch
  int64_t pool_batches = 1;    ///< distinct global batches generated and cycled
  torch::Device device = torch::kCPU;
  bool channels_last = false;  ///< store 4-D float inputs in NHWC memory order
};

/// Sample k of global batch i is sample(i·global_batch + k), which depends on
/// its index alone, and each worker makes only its contiguous slice [rank·b,
/// (rank+1)·b), so N workers together see exactly the samples that one worker
/// sees with the whole global batch, at 1/N of the cost each.
///
/// The pool is the synthetic training set: an epoch is one pass over it
/// (steps_per_epoch() = pool_batches).
class SyntheticData : public DataSource {
 public:
  SyntheticData(const SyntheticOptions& options, const SampleFn& sample);
  Batch batch(int64_t step) override;
  int64_t local_batch() const override { return local_batch_; }
  std::string name() const override { return "synthetic"; }
  Provides provides() const override { return provides_; }
  int64_t steps_per_epoch() const override { return static_cast<int64_t>(pool_.size()); }

 private:
  int64_t local_batch_ = 0;
  Provides provides_;
  std::vector<Batch> pool_;
};

/// The held-out synthetic samples an evaluation reads: `test_samples` of
/// them, sample j being `sample(j)` (the task's test generator, whose
/// indices no training sample has), split over ranks as EvalSlice splits a
/// test set (contiguous parts, batches of the local batch, the last shorter),
/// made when asked for.
class SyntheticTestData : public DataSource {
 public:
  /// Batches of options.global_batch / world_size samples (options.pool_batches unused).
  SyntheticTestData(int64_t test_samples, const SyntheticOptions& options, const SampleFn& sample);
  Batch batch(int64_t step) override;
  int64_t local_batch() const override { return local_batch_; }
  std::string name() const override { return "synthetic test"; }
  Provides provides() const override { return provides_; }
  int64_t steps_per_epoch() const override { return slice_.steps_per_epoch(); }

 private:
  SyntheticOptions options_;
  SampleFn sample_;
  int64_t local_batch_ = 0;
  EvalSlice slice_;
  Provides provides_;
};

}  // namespace dlscale::data
