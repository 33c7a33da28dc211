#pragma once
// The global sampler: which samples make up global batch i, whatever the
// number of workers (docs/data.md, "Order and sharding").
#include <cstdint>
#include <mutex>
#include <vector>

namespace dlscale::data {

/// A well-mixed 64-bit value from (seed, value) (splitmix64 of both): seeds
/// per-sample randomness so it depends only on what the sample is.
uint64_t mix_seed(uint64_t seed, uint64_t value);

struct SamplerOptions {
  int64_t dataset_size = 0;  ///< samples in the dataset
  int64_t global_batch = 1;  ///< samples per step over all workers
  uint64_t seed = 42;        ///< the order of epoch e depends on (seed, e) only
  bool shuffle = true;       ///< false: every epoch in index order
};

/// Each epoch is a permutation of the whole dataset (Fisher–Yates driven by
/// splitmix64, so identical on every platform and worker); global batch i is
/// positions [(i mod s)·G, (i mod s + 1)·G) of epoch i / s, where s =
/// floor(size / G) steps per epoch (the last size mod G samples of an epoch's
/// order are not used, as drop_last=True). Rank r of N takes the contiguous
/// slice [r·G/N, (r+1)·G/N). Thread-safe.
class GlobalSampler {
 public:
  /// Throws dlscale::Error when the dataset holds fewer samples than one
  /// global batch.
  explicit GlobalSampler(const SamplerOptions& options);
  int64_t steps_per_epoch() const { return steps_per_epoch_; }
  /// Dataset indices of samples [begin, begin + count) of global batch `step`.
  std::vector<int64_t> indices(int64_t step, int64_t begin, int64_t count);
  /// The epoch global batch `step` belongs to.
  int64_t epoch_of(int64_t step) const { return step / steps_per_epoch_; }

 private:
  SamplerOptions options_;
  int64_t steps_per_epoch_ = 0;
  std::mutex mutex_;
  int64_t cached_epoch_ = -1;
  std::vector<int64_t> order_;
};

}  // namespace dlscale::data
