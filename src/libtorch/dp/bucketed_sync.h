#pragma once
// The shared engine of the bucketed strategies (allreduce, tree,
// hierarchical): PyTorch DDP's bucketing with overlap, with the collective
// of one bucket supplied by the strategy (libtorch/dp/bucket_collective.h).
//  - gradients are packed into flat buckets in reverse parameter order; a
//    bucket is closed once it reaches its cap (first_bucket_mb for the first,
//    bucket_mb for the others), the parameter that crosses it included;
//  - an autograd hook copies each gradient into its bucket as soon as it is
//    produced; when a bucket is complete its collective starts on a
//    background communication thread, overlapping the rest of the backward;
//  - buckets are launched strictly in bucket order, so every rank issues the
//    same sequence of collectives;
//  - each gradient is divided by the world size as it is copied into its
//    bucket (the average applied once, fused with the copy, and before any
//    cast to a 16-bit wire type, so the sum cannot overflow it), so the
//    summed bucket is the mean gradient;
//  - with compression the bucket is cast to float16/bfloat16 on the
//    communication thread, summed in that type, and cast back to float32;
//  - after backward, the step waits for the remaining buckets (the exposed
//    communication time) and makes each parameter's .grad a view of its
//    bucket slot (same strides as the param);
//  - once a collective fails, no further collective is issued: the step
//    rethrows the failure instead of waiting out a timeout per bucket.
// bucket_mb = 0 selects the baseline: one bucket reduced after backward.
#include <torch/torch.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "libtorch/comm/communicator.h"
#include "libtorch/dp/bucket_collective.h"
#include "libtorch/dp/gradient_sync.h"

namespace dlscale::dp {

class BucketedSync : public GradientSync {
 public:
  /// `params` are the trainable parameters in registration order; `comm`
  /// must outlive this (its size is the world the gradients are averaged
  /// over); `collective` sums one bucket. Registers autograd hooks on the
  /// parameters. Uses options.bucket_mb, first_bucket_mb and compress.
  BucketedSync(std::vector<torch::Tensor> params, comm::Communicator& comm,
               std::unique_ptr<BucketCollective> collective, const SyncOptions& options);
  ~BucketedSync() override;
  BucketedSync(const BucketedSync&) = delete;
  BucketedSync& operator=(const BucketedSync&) = delete;

  const SyncInfo& info() const override { return info_; }
  void begin_backward() override;
  /// Launches buckets not yet launched (zero gradients for parameters that
  /// received none), waits for every bucket and sets each .grad to the mean.
  SyncStepStats end_backward() override;
  /// The bucket buffers (and wire copies) hold the gradients.
  HeldBytes held_bytes() const override;

  bool overlaps() const { return overlap_; }
  size_t num_buckets() const { return buckets_.size(); }
  /// Wire bytes of each bucket, in launch order.
  std::vector<int64_t> bucket_bytes() const;

 protected:
  /// How a strategy that reduces buckets its own way (the sharded one)
  /// shapes them.
  struct Layout {
    int64_t pad_to = 1;         ///< each bucket's elements are a multiple of this (zeros after the gradients)
    bool keep_buffers = true;   ///< false: a bucket's buffer exists from its first gradient until release_buffer()
    /// The buckets' parameters (indices into params), in launch order;
    /// empty: planned by size from --bucket-mb and --first-bucket-mb.
    std::vector<std::vector<size_t>> groups;
    /// Each parameter's slot starts at a multiple of this many elements
    /// (zeros between slots): 1 packs them; ZeRO, whose parameters live in
    /// the buffers, aligns them as an allocator would (kAlignedSlot).
    int64_t align = 1;
  };
  /// 16 float32 elements: 64 bytes, a cache line and an AVX-512 vector;
  /// CUDA kernels and cuDNN need at most 16-byte-aligned operands.
  static constexpr int64_t kAlignedSlot = 16;
  struct Bucket {
    torch::Tensor buffer;        // flat, float32; undefined between steps without keep_buffers
    torch::Tensor wire;          // flat, the wire type; undefined without compression
    int64_t elements = 0;        // of the buffer, padding included
    std::vector<size_t> params;  // indices into params_
    int pending = 0;             // gradients still missing this step
    bool done = false;           // collective finished this step
    BucketTiming timing;
  };

  /// For a subclass that overrides reduce_bucket() and finish_backward()
  /// and fills info_ itself.
  BucketedSync(std::vector<torch::Tensor> params, comm::Communicator& comm, const SyncOptions& options,
               Layout layout);
  /// On the communication thread: reduce `bucket` (tag < 2^20 tells the
  /// buckets of a step apart). By default the collective's sum in place,
  /// through the wire type.
  virtual void reduce_bucket(Bucket& bucket, uint32_t tag);
  /// After every bucket is reduced: by default each .grad becomes a view of
  /// its bucket slot.
  virtual void finish_backward();
  /// On the thread running backward, as soon as every parameter of
  /// `bucket` has its gradient (its collective is then queued).
  virtual void bucket_complete(Bucket& /*bucket*/) {}
  /// Frees a bucket's buffer (keep_buffers = false), once it is reduced.
  void release_buffer(Bucket& bucket);
  /// Stops the communication thread; a subclass calls it first in its
  /// destructor (its reduce_bucket may use the subclass's members).
  void stop_comm_thread();

  const std::vector<torch::Tensor>& params() const { return params_; }
  std::vector<Bucket>& buckets() { return buckets_; }
  const std::vector<Bucket>& buckets() const { return buckets_; }
  /// The bucket parameter `k` is in.
  size_t bucket_of(size_t k) const { return bucket_of_.at(k); }
  torch::ScalarType wire_dtype() const { return wire_; }
  /// Where parameter `k`'s slot starts in its bucket, in elements.
  int64_t slot_offset(size_t k) const { return offset_of_[k]; }

  SyncInfo info_;

 private:
  void make_buckets(double first_bucket_mb, double bucket_mb);
  /// Gives `bucket` a zeroed buffer and its parameters' slots, if it has none.
  void ensure_buffer(Bucket& bucket);
  void start();

  void on_grad(size_t param, const torch::Tensor& grad);
  void mark_ready(size_t bucket);  // with mu_ held
  void launch_in_order();          // with mu_ held
  void comm_loop();

  std::vector<torch::Tensor> params_;
  std::unique_ptr<BucketCollective> collective_;
  const bool overlap_;
  const Layout layout_;
  torch::ScalarType wire_ = torch::kFloat32;
  const torch::Tensor inv_world_;  // 1 / world size: gradients are scaled as they are packed
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_;     // param index -> bucket index
  std::vector<int64_t> offset_of_;    // param index -> its slot's offset in the bucket
  std::vector<torch::Tensor> views_;  // param index -> view of its bucket slot
  std::vector<bool> seen_;            // param index -> gradient arrived this step
  std::vector<bool> ready_;           // bucket index -> complete, may launch
  size_t next_launch_ = 0;
  std::vector<unsigned> hook_handles_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<size_t> queue_;
  size_t completed_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
  bool failed_ = false;  // a collective failed: issue no more
  std::thread comm_thread_;
};

}  // namespace dlscale::dp
