#include "libtorch/dp/bucketed_sync.h"

#include "libtorch/compute/dtype_name.h"
#include "core/clock.h"
#include "core/error.h"
#include "dp/bucket_plan.h"

namespace dlscale::dp {

namespace {

torch::ScalarType wire_type(Compression compress) {
  return compress == Compression::kFp16   ? torch::kFloat16
         : compress == Compression::kBf16 ? torch::kBFloat16
                                          : torch::kFloat32;
}

}  // namespace

BucketedSync::BucketedSync(std::vector<torch::Tensor> params, comm::Communicator& comm,
                           std::unique_ptr<BucketCollective> collective, const SyncOptions& options)
    : BucketedSync(std::move(params), comm, options, Layout{}) {
  collective_ = std::move(collective);
  info_.strategy = collective_->name();
  info_.layout = overlap_ ? "bucketed" : "flat";
  for (int64_t b : info_.bucket_bytes) info_.formula_bytes_sent += collective_->bytes_sent(b);
  info_.formula = collective_->formula();
  info_.nodes = collective_->nodes();
}

BucketedSync::BucketedSync(std::vector<torch::Tensor> params, comm::Communicator& comm,
                           const SyncOptions& options, Layout layout)
    : params_(std::move(params)),
      overlap_(options.bucket_mb > 0),
      layout_(layout),
      wire_(wire_type(options.compress)),
      inv_world_(torch::scalar_tensor(1.0 / comm.size(), torch::kFloat32)) {
  check_sync_options(options);
  for (const auto& p : params_) {
    DLSCALE_CHECK(p.scalar_type() == torch::kFloat32 && p.device() == params_[0].device(),
                  "bucketed strategies support float32 parameters on one device (got {} on {})",
                  c10::toString(p.scalar_type()), p.device().str());
  }
  make_buckets(options.first_bucket_mb, options.bucket_mb);
  info_.wire_dtype = dtype_name(wire_);
  info_.bucket_bytes = bucket_bytes();
  start();
}

void BucketedSync::start() {
  seen_.assign(params_.size(), false);
  ready_.assign(buckets_.size(), false);
  if (overlap_) {
    for (size_t k = 0; k < params_.size(); ++k) {
      hook_handles_.push_back(
          params_[k].register_hook([this, k](const torch::Tensor& grad) { on_grad(k, grad); }));
    }
  }
  comm_thread_ = std::thread([this] { comm_loop(); });
}

void BucketedSync::make_buckets(double first_bucket_mb, double bucket_mb) {
  std::vector<std::vector<size_t>> groups = layout_.groups;
  if (groups.empty()) {
    // Gradients become ready in about reverse registration order.
    std::vector<size_t> order;
    std::vector<int64_t> bytes;
    for (size_t k = params_.size(); k-- > 0;) {
      order.push_back(k);
      bytes.push_back(params_[k].numel() * static_cast<int64_t>(params_[k].element_size()));
    }
    groups = plan_buckets(bytes, first_bucket_mb, overlap_ ? bucket_mb : 0.0);
    for (auto& group : groups) {
      for (size_t& i : group) i = order[i];
    }
  }
  size_t assigned = 0;
  for (const auto& group : groups) assigned += group.size();
  DLSCALE_ASSERT(assigned == params_.size());  // every parameter in one bucket
  bucket_of_.resize(params_.size());
  offset_of_.resize(params_.size());
  views_.resize(params_.size());
  for (size_t b = 0; b < groups.size(); ++b) {
    Bucket bucket;
    int64_t offset = 0;
    for (size_t k : groups[b]) {
      bucket.params.push_back(k);
      bucket_of_[k] = b;
      offset = (offset + layout_.align - 1) / layout_.align * layout_.align;
      offset_of_[k] = offset;
      offset += params_[k].numel();
    }
    bucket.elements = (offset + layout_.pad_to - 1) / layout_.pad_to * layout_.pad_to;
    bucket.timing.bucket = static_cast<int>(b);
    if (layout_.keep_buffers) {
      ensure_buffer(bucket);
      if (wire_ != torch::kFloat32) bucket.wire = torch::zeros({bucket.elements}, bucket.buffer.options().dtype(wire_));
    }
    buckets_.push_back(std::move(bucket));
  }
}

void BucketedSync::ensure_buffer(Bucket& bucket) {
  if (bucket.buffer.defined()) return;
  // Buckets live beside the parameters (on the GPU for --device cuda); the
  // communicator stages them if its backend needs another device.
  const auto on = torch::TensorOptions().device(params_.empty() ? torch::Device(torch::kCPU)
                                                                : params_[0].device());
  bucket.buffer = torch::zeros({bucket.elements}, on.dtype(torch::kFloat32));
  for (size_t k : bucket.params) {
    const torch::Tensor& p = params_[k];
    // The slot has the parameter's own strides (channels-last convolution
    // weights included), so gradients copy straight in and serve as .grad.
    views_[k] = bucket.buffer.narrow(0, offset_of_[k], p.numel()).as_strided(p.sizes(), p.strides());
  }
}

void BucketedSync::release_buffer(Bucket& bucket) {
  DLSCALE_ASSERT(!layout_.keep_buffers);
  bucket.buffer = torch::Tensor();
  for (size_t k : bucket.params) views_[k] = torch::Tensor();
}

void BucketedSync::stop_comm_thread() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    cv_.notify_all();
  }
  if (comm_thread_.joinable()) comm_thread_.join();
}

BucketedSync::~BucketedSync() {
  for (size_t k = 0; k < hook_handles_.size(); ++k) params_[k].remove_hook(hook_handles_[k]);
  stop_comm_thread();
}

std::vector<int64_t> BucketedSync::bucket_bytes() const {
  std::vector<int64_t> out;
  for (const auto& b : buckets_) out.push_back(b.elements * static_cast<int64_t>(c10::elementSize(wire_)));
  return out;
}

HeldBytes BucketedSync::held_bytes() const {
  HeldBytes held;
  held.grads = 0;
  for (const auto& b : buckets_) {
    if (b.buffer.defined()) held.grads += b.buffer.numel() * static_cast<int64_t>(b.buffer.element_size());
    if (b.wire.defined()) held.grads += b.wire.numel() * static_cast<int64_t>(b.wire.element_size());
  }
  return held;
}

void BucketedSync::begin_backward() {
  std::lock_guard<std::mutex> lock(mu_);
  DLSCALE_ASSERT(queue_.empty());
  seen_.assign(params_.size(), false);
  ready_.assign(buckets_.size(), false);
  next_launch_ = 0;
  completed_ = 0;
  for (auto& b : buckets_) {
    b.pending = static_cast<int>(b.params.size());
    b.done = false;
  }
}

void BucketedSync::on_grad(size_t k, const torch::Tensor& grad) {
  // Runs on the thread executing backward, while the communication thread
  // may be reducing other buckets.
  if (local_backward()) return;  // --accumulate: autograd sums it in .grad
  {
    torch::NoGradGuard no_grad;
    ensure_buffer(buckets_[bucket_of_[k]]);
    at::mul_out(views_[k], grad, inv_world_);  // copy and average in one pass
  }
  const size_t b = bucket_of_[k];
  {
    std::lock_guard<std::mutex> lock(mu_);
    DLSCALE_ASSERT(!seen_[k]);  // a parameter used twice per step is not supported
    seen_[k] = true;
    if (--buckets_[b].pending != 0) return;
    mark_ready(b);
  }
  bucket_complete(buckets_[b]);
}

void BucketedSync::mark_ready(size_t b) {
  ready_[b] = true;
  launch_in_order();
}

void BucketedSync::launch_in_order() {
  while (next_launch_ < buckets_.size() && ready_[next_launch_]) {
    queue_.push_back(next_launch_++);
    cv_.notify_all();
  }
}

void BucketedSync::reduce_bucket(Bucket& bucket, uint32_t tag) {
  DLSCALE_ASSERT(collective_ != nullptr);
  if (!bucket.wire.defined()) {
    collective_->sum(bucket.buffer, tag);
    return;
  }
  bucket.wire.copy_(bucket.buffer);  // round to the wire type
  collective_->sum(bucket.wire, tag);
  bucket.buffer.copy_(bucket.wire);
}

void BucketedSync::comm_loop() {
  while (true) {
    size_t b = 0;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      b = queue_.front();
      queue_.pop_front();
    }
    Bucket& bucket = buckets_[b];
    const double start = now_seconds();
    std::exception_ptr error;
    if (!failed_) {  // only this thread writes failed_
      try {
        reduce_bucket(bucket, static_cast<uint32_t>(b));
      } catch (...) {
        error = std::current_exception();
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    bucket.timing.start = start;
    bucket.timing.end = now_seconds();
    bucket.done = true;
    ++completed_;
    if (error) {
      failed_ = true;
      if (!error_) error_ = error;
    }
    cv_.notify_all();
  }
}

SyncStepStats BucketedSync::end_backward() {
  const double start = now_seconds();
  {
    torch::NoGradGuard no_grad;
    std::unique_lock<std::mutex> lock(mu_);
    // Parameters that got no gradient this step (or every parameter, without
    // overlap) are packed now; buckets then launch in order as usual.
    for (size_t b = 0; b < buckets_.size(); ++b) {
      Bucket& bucket = buckets_[b];
      if (ready_[b]) continue;
      ensure_buffer(bucket);
      for (size_t k : bucket.params) {
        if (seen_[k]) continue;
        const torch::Tensor& g = params_[k].grad();
        if (g.defined()) {
          at::mul_out(views_[k], g, inv_world_);
        } else {
          views_[k].zero_();
        }
        seen_[k] = true;
      }
      bucket.pending = 0;
      ready_[b] = true;
    }
    launch_in_order();
    cv_.wait(lock, [&] { return completed_ == buckets_.size(); });
    // The failure stays: a later step rethrows it without communicating.
    if (error_) std::rethrow_exception(error_);
  }
  SyncStepStats stats;
  stats.exposed_seconds = now_seconds() - start;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const Bucket& bucket = buckets_[b];
    stats.bytes += info_.bucket_bytes[b];
    stats.busy_seconds += bucket.timing.end - bucket.timing.start;
    stats.buckets.push_back(bucket.timing);
  }
  finish_backward();
  return stats;
}

void BucketedSync::finish_backward() {
  for (size_t k = 0; k < params_.size(); ++k) params_[k].mutable_grad() = views_[k];
}

}  // namespace dlscale::dp
