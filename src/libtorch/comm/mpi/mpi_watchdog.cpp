#include "libtorch/comm/mpi/mpi_watchdog.h"

// Only the C API: Open MPI's deprecated C++ bindings need a library we do not link.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <cstdio>

#include "core/error.h"

namespace dlscale::comm {

MpiWatchdog::MpiWatchdog() : thread_([this] { loop(); }) {}

MpiWatchdog::~MpiWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

uint64_t MpiWatchdog::arm(std::chrono::milliseconds timeout, std::string message) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t id = next_++;
  armed_[id] = {std::chrono::steady_clock::now() + timeout, std::move(message)};
  cv_.notify_all();
  return id;
}

void MpiWatchdog::disarm(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  armed_.erase(id);
}

void MpiWatchdog::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (armed_.empty()) {
      cv_.wait(lock);
      continue;
    }
    auto earliest = armed_.begin();
    for (auto it = armed_.begin(); it != armed_.end(); ++it) {
      if (it->second.at < earliest->second.at) earliest = it;
    }
    if (std::chrono::steady_clock::now() >= earliest->second.at) {
      // main() never regains control from the blocked call: report as it would.
      std::fprintf(stderr, "dlscale: error: %s\n", earliest->second.message.c_str());
      std::fflush(stderr);
      MPI_Abort(MPI_COMM_WORLD, kExitPeerFailure);
    }
    const auto until = earliest->second.at;  // the entry may go while we wait
    cv_.wait_until(lock, until);
  }
}

}  // namespace dlscale::comm
