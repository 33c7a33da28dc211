#pragma once
// Deadlines for blocking MPI collectives. MPI calls have no timeout, and
// Open MPI's non-blocking collectives (which can be polled against one) are
// a slower implementation than its blocking ones. So with
// MPI_THREAD_MULTIPLE the communicator calls the blocking collective and
// arms this watchdog first: if the call is still running at its deadline
// (a peer died or stalled), the watchdog prints the error line and aborts
// the job with exit code 5 (MPI_Abort; mpirun then stops every rank).
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>

namespace dlscale::comm {

class MpiWatchdog {
 public:
  MpiWatchdog();
  ~MpiWatchdog();
  MpiWatchdog(const MpiWatchdog&) = delete;
  MpiWatchdog& operator=(const MpiWatchdog&) = delete;

  /// Starts a deadline `timeout` from now; `message` is the error line
  /// printed if it passes. Returns the id to disarm. Thread-safe.
  uint64_t arm(std::chrono::milliseconds timeout, std::string message);
  void disarm(uint64_t id);

 private:
  struct Deadline {
    std::chrono::steady_clock::time_point at;
    std::string message;
  };
  void loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, Deadline> armed_;
  uint64_t next_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

/// Arms `watchdog` for the lifetime of a scope (RAII).
class ArmedDeadline {
 public:
  ArmedDeadline(MpiWatchdog& watchdog, std::chrono::milliseconds timeout, std::string message)
      : watchdog_(watchdog), id_(watchdog.arm(timeout, std::move(message))) {}
  ~ArmedDeadline() { watchdog_.disarm(id_); }
  ArmedDeadline(const ArmedDeadline&) = delete;
  ArmedDeadline& operator=(const ArmedDeadline&) = delete;

 private:
  MpiWatchdog& watchdog_;
  uint64_t id_;
};

}  // namespace dlscale::comm
