#pragma once
// A fixed set of threads that run the items of one loop at a time (the data
// pipeline's decode threads). Independent of LibTorch's intra-op pool.
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace dlscale {

class WorkPool {
 public:
  /// Starts `threads` (>= 1) threads.
  explicit WorkPool(int threads);
  ~WorkPool();
  WorkPool(const WorkPool&) = delete;
  WorkPool& operator=(const WorkPool&) = delete;

  /// Runs fn(0) … fn(n − 1) on the pool's threads and returns when all are
  /// done. The first exception an item throws is rethrown here (the other
  /// items still run). One caller at a time.
  void run(int64_t n, const std::function<void(int64_t)>& fn);
  int threads() const { return static_cast<int>(threads_.size()); }

 private:
  void loop();

  std::mutex mutex_;
  std::condition_variable work_;
  std::condition_variable done_;
  const std::function<void(int64_t)>* fn_ = nullptr;
  int64_t next_ = 0;
  int64_t count_ = 0;
  int64_t finished_ = 0;
  bool stopping_ = false;
  std::exception_ptr error_;
  std::vector<std::thread> threads_;
};

}  // namespace dlscale
