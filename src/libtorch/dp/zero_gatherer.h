#pragma once
// ZeRO stage 3 unit by unit (--zero-unit block, libtorch/dp/zero_sync.cpp): the
// thread that gathers the units' parameter buffers ahead of compute.
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "libtorch/comm/communicator.h"
#include "core/clock.h"

namespace dlscale::dp {

/// Stage 3 unit by unit: the all-gathers of parameter buffers, in the order
/// requested, on a thread and a communicator of their own (split from the
/// workers'), so that the next unit's gather overlaps compute while the
/// reduce-scatters keep their own order on the workers' communicator.
class Gatherer {
 public:
  using Gather = std::function<void(comm::Communicator&, size_t)>;
  Gatherer(std::unique_ptr<comm::Communicator> comm, Gather gather)
      : comm_(std::move(comm)), gather_(std::move(gather)), thread_([this] { loop(); }) {}
  ~Gatherer() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void enqueue(size_t bucket) {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(bucket);
    cv_.notify_all();
  }
  /// Waits for `bucket`'s gather; rethrows a failed gather's error.
  void wait(size_t bucket) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return error_ || done_.count(bucket) > 0; });
    if (error_) std::rethrow_exception(error_);
    done_.erase(bucket);
  }
  /// Seconds spent gathering so far.
  double busy_seconds() {
    std::lock_guard<std::mutex> lock(mu_);
    return busy_;
  }

 private:
  void loop() {
    while (true) {
      size_t bucket = 0;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (stop_) return;
        bucket = queue_.front();
        queue_.pop_front();
        if (error_) continue;  // after a failure, no further collective
      }
      const double start = now_seconds();
      std::exception_ptr error;
      try {
        gather_(*comm_, bucket);
      } catch (...) {
        error = std::current_exception();
      }
      std::lock_guard<std::mutex> lock(mu_);
      busy_ += now_seconds() - start;
      if (error && !error_) error_ = error;
      done_.insert(bucket);
      cv_.notify_all();
    }
  }

  std::unique_ptr<comm::Communicator> comm_;
  Gather gather_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<size_t> queue_;
  std::set<size_t> done_;
  std::exception_ptr error_;
  double busy_ = 0;
  bool stop_ = false;
  std::thread thread_;  // last: starts once the rest is built
};

}  // namespace dlscale::dp
