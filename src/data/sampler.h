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

/// Which samples one rank trains on at each step.
class BatchSampler {
 public:
  virtual ~BatchSampler() = default;
  /// Dataset indices of this rank's samples in `step`.
  virtual std::vector<int64_t> rank_indices(int64_t step) = 0;
  virtual int64_t steps_per_epoch() const = 0;
  int64_t epoch_of(int64_t step) const { return step / steps_per_epoch(); }
};

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

/// Rank r's slice [r·b, (r+1)·b) of each global batch of a GlobalSampler.
class GlobalSlice : public BatchSampler {
 public:
  GlobalSlice(const SamplerOptions& options, int64_t rank, int64_t world_size);
  std::vector<int64_t> rank_indices(int64_t step) override {
    return sampler_.indices(step, rank_ * local_batch_, local_batch_);
  }
  int64_t steps_per_epoch() const override { return sampler_.steps_per_epoch(); }

 private:
  GlobalSampler sampler_;
  int64_t rank_ = 0;
  int64_t local_batch_ = 0;
};

struct StreamingOptions {
  /// First sample of each of this rank's shards (the dataset holds only
  /// those: open_dataset's ShardPick), ascending, from 0.
  std::vector<int64_t> shard_starts;
  int64_t dataset_size = 0;           ///< samples in this rank's shards
  int64_t local_batch = 1;            ///< samples per step on each rank
  int64_t rank = 0;                   ///< seeds the order
  /// The smallest rank's samples and which rank that is, as the ranks agreed
  /// (every rank runs its steps per epoch); 0: this rank's own.
  int64_t smallest_samples = 0;
  int64_t smallest_rank = 0;
  int64_t shuffle_buffer = 1024;      ///< samples held for shuffling; 1 = shard order
  uint64_t seed = 42;
};

/// Evaluation order: rank r of N takes the contiguous part [r·n/N, (r+1)·n/N)
/// of the whole dataset, in index order, in batches of `local_batch` (the
/// last one shorter), so the ranks together see every sample exactly once.
/// Step s is batch s mod (this rank's batches): one pass after another.
class EvalSlice : public BatchSampler {
 public:
  EvalSlice(int64_t dataset_size, int64_t local_batch, int64_t rank, int64_t world_size);
  std::vector<int64_t> rank_indices(int64_t step) override;
  /// This rank's batches per pass (0 when its part is empty).
  int64_t steps_per_epoch() const override { return batches_; }

 private:
  int64_t begin_ = 0;
  int64_t end_ = 0;
  int64_t local_batch_ = 1;
  int64_t batches_ = 0;
};

/// Streaming order (docs/data.md): rank r reads only its own shards (r, r + N,
/// r + 2N… of the location, which is all its dataset holds), in a seeded
/// order per epoch, each shard front to back, through a shuffle
/// buffer (each sample out is a random one of the buffer's, replaced by the
/// next read). Every rank runs the same number of steps per epoch: the
/// smallest rank's samples / local batch. Unlike GlobalSlice, the samples a
/// step trains on depend on the number of workers.
class StreamingSampler : public BatchSampler {
 public:
  /// Throws dlscale::Error when a rank's shards hold fewer samples than one
  /// local batch.
  explicit StreamingSampler(StreamingOptions options);
  std::vector<int64_t> rank_indices(int64_t step) override;
  int64_t steps_per_epoch() const override { return steps_per_epoch_; }

 private:
  std::vector<int64_t> epoch_order(int64_t epoch) const;
  StreamingOptions options_;
  int64_t steps_per_epoch_ = 0;
  std::mutex mutex_;
  int64_t cached_epoch_ = -1;
  std::vector<int64_t> order_;
};

}  // namespace dlscale::data
