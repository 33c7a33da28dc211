#pragma once
// Synchronous data-parallel gradient aggregation by bucketed allreduce with
// overlap (PyTorch DDP's scheme, docs/strategies.md):
//  - gradients are packed into flat buckets in reverse parameter order; a
//    bucket is closed once it reaches its cap (first_bucket_mb for the first,
//    bucket_mb for the others), the parameter that crosses it included;
//  - an autograd hook copies each gradient into its bucket as soon as it is
//    produced; when a bucket is complete its allreduce starts on a background
//    communication thread, overlapping the rest of the backward pass;
//  - buckets are launched strictly in bucket order, so every rank issues the
//    same sequence of collectives;
//  - each gradient is divided by the world size as it is copied into its
//    bucket (the average applied once, fused with the copy), so the summed
//    bucket is the mean gradient;
//  - after backward, the step waits for the remaining buckets (the exposed
//    communication time) and makes each parameter's .grad a view of its
//    bucket slot (same strides as the param).
// bucket_mb = 0 selects the baseline: one allreduce of all gradients after
// backward, no overlap.
#include <torch/torch.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "comm/communicator.h"

namespace dlscale::dp {

struct ReducerOptions {
  double bucket_mb = 25.0;       ///< bucket capacity in MiB; 0 = one flat allreduce after backward
  double first_bucket_mb = 1.0;  ///< capacity of the first bucket (the last layers' gradients)
};

/// Timing of one bucket's allreduce in one step, seconds on the monotonic clock.
struct BucketTiming {
  int bucket = 0;
  double start = 0;
  double end = 0;
};

/// What communication cost in one step.
struct ReducerStepStats {
  double exposed_seconds = 0;  ///< time the step waited for communication after backward
  double busy_seconds = 0;     ///< time the communication thread spent in allreduce
  int64_t bytes = 0;           ///< bytes allreduced (every bucket, once)
  std::vector<BucketTiming> buckets;
};

class BucketReducer {
 public:
  /// `params` are the trainable parameters in registration order; `comm`
  /// must outlive the reducer. Registers autograd hooks on the parameters.
  BucketReducer(std::vector<torch::Tensor> params, comm::Communicator& comm,
                const ReducerOptions& options);
  ~BucketReducer();
  BucketReducer(const BucketReducer&) = delete;
  BucketReducer& operator=(const BucketReducer&) = delete;

  /// Call before backward.
  void begin_step();
  /// Call after backward: launches buckets not yet launched (zero gradients
  /// for parameters that received none), waits for every bucket and sets each
  /// .grad to the average. Rethrows a communication error as dlscale::Error.
  ReducerStepStats finish_step();

  bool overlaps() const { return overlap_; }
  size_t num_buckets() const { return buckets_.size(); }
  /// Bytes of each bucket, in launch order.
  std::vector<int64_t> bucket_bytes() const;

 private:
  struct Bucket {
    torch::Tensor buffer;           // flat, float32
    std::vector<size_t> params;     // indices into params_
    int pending = 0;                // gradients still missing this step
    bool done = false;              // allreduce finished this step
    BucketTiming timing;
  };

  void on_grad(size_t param, const torch::Tensor& grad);
  void mark_ready(size_t bucket);     // with mu_ held
  void launch_in_order();             // with mu_ held
  void comm_loop();

  std::vector<torch::Tensor> params_;
  comm::Communicator& comm_;
  const bool overlap_;
  const torch::Tensor inv_world_;       // 1 / world size: gradients are scaled as they are packed
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_;       // param index -> bucket index
  std::vector<torch::Tensor> views_;    // param index -> view of its bucket slot
  std::vector<bool> seen_;              // param index -> gradient arrived this step
  std::vector<bool> ready_;             // bucket index -> complete, may launch
  size_t next_launch_ = 0;
  std::vector<unsigned> hook_handles_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<size_t> queue_;
  size_t completed_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread comm_thread_;
};

}  // namespace dlscale::dp
