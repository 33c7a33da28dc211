#pragma once
// Runs one function per rank on its own thread, over a communicator of the
// requested backend, and rethrows the first failure.
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "libtorch/comm/communicator.h"
#include "libtorch/comm/gloo/gloo_communicator.h"
#include "libtorch/comm/inproc/inproc_communicator.h"
#include "comm/tcp_store.h"

namespace dlscale::comm::testing {

using RankFn = std::function<void(Communicator&)>;

/// Runs `fn` on `size` ranks of `backend` ("inproc" or "gloo"), each on its
/// own thread; exceptions from any rank are rethrown (the first one).
inline void run_ranks(const std::string& backend, int size, const RankFn& fn,
                      std::chrono::milliseconds timeout = std::chrono::milliseconds(20000)) {
  std::shared_ptr<InProcGroup> group;
  std::unique_ptr<TcpStoreServer> server;
  if (backend == "inproc") {
    group = std::make_shared<InProcGroup>(size);
  } else {
    server = std::make_unique<TcpStoreServer>("127.0.0.1", 0);
  }
  std::mutex mu;
  std::exception_ptr first;
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      try {
        if (backend == "inproc") {
          InProcCommunicator comm(group, r, timeout);
          fn(comm);
        } else {
          TcpStore store("127.0.0.1", server->port(), timeout);
          GlooOptions go;
          go.timeout = timeout;
          GlooCommunicator comm(store, r, size, go);
          fn(comm);
        }
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!first) first = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

}  // namespace dlscale::comm::testing
