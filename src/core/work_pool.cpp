#include "core/work_pool.h"

#include <algorithm>

namespace dlscale {

WorkPool::WorkPool(int threads) {
  for (int i = 0; i < std::max(1, threads); ++i) threads_.emplace_back([this] { loop(); });
}

WorkPool::~WorkPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_.notify_all();
  for (auto& t : threads_) t.join();
}

void WorkPool::run(int64_t n, const std::function<void(int64_t)>& fn) {
  if (n <= 0) return;
  std::unique_lock<std::mutex> lock(mutex_);
  fn_ = &fn;
  next_ = 0;
  count_ = n;
  finished_ = 0;
  error_ = nullptr;
  work_.notify_all();
  done_.wait(lock, [&] { return finished_ == count_; });
  fn_ = nullptr;
  count_ = 0;
  if (error_) std::rethrow_exception(error_);
}

void WorkPool::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    work_.wait(lock, [&] { return stopping_ || next_ < count_; });
    if (stopping_) return;
    const int64_t item = next_++;
    const auto* fn = fn_;
    lock.unlock();
    std::exception_ptr error;
    try {
      (*fn)(item);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    if (error && !error_) error_ = error;
    if (++finished_ == count_) done_.notify_all();
  }
}

}  // namespace dlscale
