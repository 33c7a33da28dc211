#pragma once
// The one place where a communicator is made from a backend, by
// session.cpp's table of factories (the words are comm/backend.cpp's). A
// CommSession owns what the backend needs for the life of the job: its
// runtime (MPI's), or the rendezvous store client (and its server on the
// rank that hosts it). `dlscale train` and `dlscale commbench` both join
// jobs this way.
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "comm/backend.h"
#include "libtorch/comm/communicator.h"

namespace dlscale::comm {

class TcpStore;
class TcpStoreServer;

struct SessionOptions {
  std::string backend = "gloo";  ///< one this build has (comm/backend.h)
  int cuda_device = -1;          ///< this rank's GPU (nccl needs one); -1 = none
  int rank = 0;
  int size = 1;
  std::chrono::milliseconds timeout{60000};  ///< every blocking call of the communicator
  bool mpi_polled = false;  ///< mpi: poll non-blocking collectives instead of the watchdog
  // Gloo rendezvous.
  std::string store_addr = "127.0.0.1";  ///< host of the rendezvous store
  int store_port = 0;
  bool host_store = false;                  ///< this process serves the store (mpirun/srun rank 0)
  std::string store_bind_addr;              ///< address the served store listens on
  std::string store_secret;                 ///< the job's secret ("" = none)
  std::string gloo_hostname = "127.0.0.1";  ///< address peers reach this rank's Gloo device at
};

class CommSession {
 public:
  /// Joins the job: for mpi, initialises MPI and checks its world matches
  /// `options.size`; for gloo, connects to the store and builds the full
  /// mesh. Throws dlscale::Error for a bad backend name or size mismatch.
  /// The process ignores SIGPIPE from then on: a write to a dead peer is a
  /// PeerFailure, not this rank's death.
  explicit CommSession(const SessionOptions& options);
  ~CommSession();
  CommSession(const CommSession&) = delete;
  CommSession& operator=(const CommSession&) = delete;

  /// The job's communicator: accepts tensors on any device and stages them
  /// through the backend's (libtorch/comm/staged_communicator.h).
  Communicator& world() { return *world_; }
  /// The job failed: do not wait for peers on the way out (MPI_Finalize).
  void abandon();

 private:
  std::shared_ptr<void> runtime_;  ///< the backend's own (MPI's), kept until after world_
  std::function<void()> abandon_;
  std::unique_ptr<TcpStoreServer> store_server_;
  std::unique_ptr<TcpStore> store_;
  std::unique_ptr<Communicator> world_;
};

/// What a backend's factory makes: the job's communicator and, for a
/// backend with a runtime of its own (MPI), that runtime and what to do
/// when the job failed (do not wait for peers on the way out).
struct BackendWorld {
  std::unique_ptr<Communicator> world;
  std::shared_ptr<void> runtime;
  std::function<void()> abandon;
};
/// Makes a backend's communicator for a session; `store` is the joined
/// rendezvous store for a backend that meets through it, else null.
using BackendFactory = std::function<BackendWorld(const SessionOptions&, TcpStore* store)>;

/// A backend added at run time: its --backend word, whether it meets through
/// the rendezvous store (which also checks every rank's world size), and
/// its factory.
struct BackendEntry {
  BackendName name;
  bool uses_store = true;
  BackendFactory make;
};
/// Adds `entry` for --backend and CommSession; throws dlscale::Error when
/// its word is empty or taken, or it has no factory.
void register_backend(BackendEntry entry);

}  // namespace dlscale::comm
