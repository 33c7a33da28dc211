#include "dp/bucket_reducer.h"

#include "core/clock.h"
#include "core/error.h"

namespace dlscale::dp {
namespace {
constexpr double kMiB = 1024.0 * 1024.0;
}

BucketReducer::BucketReducer(std::vector<torch::Tensor> params, comm::Communicator& comm,
                             const ReducerOptions& options)
    : params_(std::move(params)),
      comm_(comm),
      overlap_(options.bucket_mb > 0),
      inv_world_(torch::scalar_tensor(1.0 / comm.size(), torch::kFloat32)) {
  DLSCALE_CHECK(options.bucket_mb >= 0, "--bucket-mb must be >= 0 (got {})", options.bucket_mb);
  DLSCALE_CHECK(options.first_bucket_mb > 0, "--first-bucket-mb must be > 0 (got {})",
                options.first_bucket_mb);
  for (const auto& p : params_) {
    DLSCALE_CHECK(p.scalar_type() == torch::kFloat32 && p.device().is_cpu(),
                  "bucketed allreduce supports float32 CPU parameters (got {} on {})",
                  c10::toString(p.scalar_type()), p.device().str());
  }
  // DDP's rule: walk the parameters in reverse registration order (about the
  // order backward produces their gradients) and close a bucket as soon as it
  // reaches its cap, the parameter that crosses the cap included. A large
  // gradient thus starts its allreduce right after it is produced instead of
  // waiting for the small ones produced after it.
  std::vector<std::vector<size_t>> groups(1);
  std::vector<int64_t> group_bytes(1, 0);
  for (size_t k = params_.size(); k-- > 0;) {
    if (overlap_ && !groups.back().empty()) {
      const double cap_mb = groups.size() == 1 ? options.first_bucket_mb : options.bucket_mb;
      if (static_cast<double>(group_bytes.back()) >= cap_mb * kMiB) {
        groups.emplace_back();
        group_bytes.push_back(0);
      }
    }
    groups.back().push_back(k);
    group_bytes.back() += params_[k].numel() * 4;
  }
  bucket_of_.resize(params_.size());
  views_.resize(params_.size());
  for (size_t b = 0; b < groups.size(); ++b) {
    Bucket bucket;
    bucket.params = groups[b];
    bucket.buffer = torch::zeros({group_bytes[b] / 4}, torch::kFloat32);
    int64_t offset = 0;
    for (size_t k : bucket.params) {
      const torch::Tensor& p = params_[k];
      // The slot has the parameter's own strides (channels-last convolution
      // weights included), so gradients copy straight in and serve as .grad.
      views_[k] = bucket.buffer.narrow(0, offset, p.numel()).as_strided(p.sizes(), p.strides());
      bucket_of_[k] = b;
      offset += p.numel();
    }
    bucket.timing.bucket = static_cast<int>(b);
    buckets_.push_back(std::move(bucket));
  }
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

BucketReducer::~BucketReducer() {
  for (size_t k = 0; k < hook_handles_.size(); ++k) params_[k].remove_hook(hook_handles_[k]);
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    cv_.notify_all();
  }
  comm_thread_.join();
}

std::vector<int64_t> BucketReducer::bucket_bytes() const {
  std::vector<int64_t> out;
  for (const auto& b : buckets_) out.push_back(b.buffer.numel() * 4);
  return out;
}

void BucketReducer::begin_step() {
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

void BucketReducer::on_grad(size_t k, const torch::Tensor& grad) {
  // Runs on the thread executing backward, while the communication thread
  // may be reducing other buckets.
  {
    torch::NoGradGuard no_grad;
    at::mul_out(views_[k], grad, inv_world_);  // copy and average in one pass
  }
  std::lock_guard<std::mutex> lock(mu_);
  DLSCALE_ASSERT(!seen_[k]);  // a parameter used twice per step is not supported
  seen_[k] = true;
  const size_t b = bucket_of_[k];
  if (--buckets_[b].pending == 0) mark_ready(b);
}

void BucketReducer::mark_ready(size_t b) {
  ready_[b] = true;
  launch_in_order();
}

void BucketReducer::launch_in_order() {
  while (next_launch_ < buckets_.size() && ready_[next_launch_]) {
    queue_.push_back(next_launch_++);
    cv_.notify_all();
  }
}

void BucketReducer::comm_loop() {
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
    try {
      comm_.allreduce(bucket.buffer, comm::ReduceOp::kSum);
    } catch (...) {
      error = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(mu_);
    bucket.timing.start = start;
    bucket.timing.end = now_seconds();
    bucket.done = true;
    ++completed_;
    if (error && !error_) error_ = error;
    cv_.notify_all();
  }
}

ReducerStepStats BucketReducer::finish_step() {
  const double start = now_seconds();
  {
    torch::NoGradGuard no_grad;
    std::unique_lock<std::mutex> lock(mu_);
    // Parameters that got no gradient this step (or every parameter, without
    // overlap) are packed now; buckets then launch in order as usual.
    for (size_t b = 0; b < buckets_.size(); ++b) {
      Bucket& bucket = buckets_[b];
      if (ready_[b]) continue;
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
    if (error_) {
      std::exception_ptr e = error_;
      error_ = nullptr;
      std::rethrow_exception(e);
    }
  }
  ReducerStepStats stats;
  stats.exposed_seconds = now_seconds() - start;
  for (auto& bucket : buckets_) {
    stats.bytes += bucket.buffer.numel() * 4;
    stats.busy_seconds += bucket.timing.end - bucket.timing.start;
    stats.buckets.push_back(bucket.timing);
  }
  for (size_t k = 0; k < params_.size(); ++k) params_[k].mutable_grad() = views_[k];
  return stats;
}

}  // namespace dlscale::dp
