#pragma once
// The input pipeline over a Dataset (docs/data.md, "The pipeline"): the
// global sampler picks this rank's slice of each global batch; --data-threads
// threads read, decode and transform its samples; a prefetch thread keeps up
// to --prefetch batches ready ahead of the training loop.
#include <atomic>
#include <condition_variable>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "libtorch/data/data_source.h"
#include "data/dataset.h"
#include "data/sampler.h"
#include "data/transforms.h"

namespace dlscale {
class WorkPool;
}

namespace dlscale::data {

struct PipelineOptions {
  int64_t global_batch = 32;
  int64_t rank = 0;
  int64_t world_size = 1;
  uint64_t seed = 42;          ///< sample order and augmentation
  bool shuffle = true;         ///< false: every epoch in index order (global order)
  bool streaming = false;      ///< each rank reads its own shards through a shuffle buffer
  bool evaluation = false;     ///< every sample once per pass, in order, split over ranks (EvalSlice)
  int64_t shuffle_buffer = 1024;
  /// Streaming over a dataset of this rank's own shards: the smallest rank's
  /// samples and which rank that is, as the ranks agreed (0: this rank's own).
  int64_t smallest_part_samples = 0;
  int64_t smallest_part = 0;
  int threads = 1;             ///< decode/transform threads (not LibTorch's pool)
  int prefetch = 2;            ///< batches built ahead; 0 = built when asked, on the caller's clock
  bool cache = false;          ///< keep decoded samples in memory after first use
  int64_t cache_bytes = 0;     ///< the cache's budget of decoded pixels; 0 = no limit
  bool reduced_decode = false; ///< decode of a JPEG only its crop, at the smallest 1/2^k scale still covering it
  bool skip_corrupt = false;   ///< replace a corrupt sample by the next readable one and count it
  TransformOptions transform;  ///< size, channels, augmentation, normalisation
  bool channels_last = false;  ///< write NHWC memory order
  torch::Device device = torch::kCPU;
};

class Pipeline : public DataSource {
 public:
  /// Throws dlscale::Error when the dataset holds fewer samples than one
  /// global batch or the batch does not divide over the workers.
  Pipeline(std::shared_ptr<const Dataset> dataset, const PipelineOptions& options);
  ~Pipeline() override;
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  /// Steps are expected in order; a jump restarts the prefetch there. In
  /// evaluation order a batch can be shorter than local_batch().
  Batch batch(int64_t step) override;
  int64_t local_batch() const override { return local_batch_; }
  std::string name() const override;
  PipelineStats stats() const override;
  int64_t steps_per_epoch() const override { return sampler_->steps_per_epoch(); }

 private:
  struct Ready {
    Batch batch;
    std::exception_ptr error;
  };
  Batch build(int64_t step);
  /// Sample `index` decoded for the transform with `seed`: of a JPEG only
  /// the crop, at a reduced scale, when `reduced_decode` (and no cache),
  /// `placement` then saying where it lies ({}: whole, as stored); from the cache when --cache holds it (shared,
  /// not copied), else from the dataset; kept in the cache while its budget
  /// lasts (the samples kept first stay: under a random order no eviction
  /// policy hits more often).
  std::shared_ptr<const Image> load(int64_t index, uint64_t seed, Placement& placement);
  void produce();

  std::shared_ptr<const Dataset> dataset_;
  PipelineOptions options_;
  int64_t local_batch_ = 0;
  std::unique_ptr<BatchSampler> sampler_;
  std::unique_ptr<WorkPool> pool_;

  mutable std::mutex mutex_;  // guards everything below
  std::condition_variable changed_;
  std::map<int64_t, Ready> ready_;
  int64_t next_ = 0;       // the next step the prefetch thread builds
  int64_t wanted_ = 0;     // the step the trainer asks for next
  bool stopping_ = false;
  PipelineStats stats_;
  std::unordered_map<int64_t, std::shared_ptr<const Image>> cache_;
  std::thread producer_;
  std::atomic<int64_t> reduced_decodes_{0};
  std::atomic<int64_t> region_decodes_{0};
};

}  // namespace dlscale::data
