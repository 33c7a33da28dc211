#pragma once
// MPI (Open MPI): used when the job runs under mpirun/srun --mpi, or when
// asked with --backend mpi. MPI has no timeouts: collectives are blocking
// calls under a watchdog's deadline (mpi_watchdog.h) when the library offers
// MPI_THREAD_MULTIPLE, else non-blocking calls polled against the deadline;
// send/recv are always non-blocking and polled.
#include <memory>

#include "libtorch/comm/communicator.h"

namespace dlscale::comm {

class MpiWatchdog;

/// How collectives keep their deadline (see mpi_watchdog.h).
enum class MpiCollectives {
  kBlocking,  ///< blocking calls under the watchdog (falls back to kPolled without THREAD_MULTIPLE)
  kPolled,    ///< non-blocking calls polled against the deadline
};

/// Owns MPI_Init_thread/MPI_Finalize for the process. After a failure the
/// destructor skips MPI_Finalize (which could wait forever on dead peers);
/// the launcher (mpirun) then stops the other ranks.
class MpiRuntime {
 public:
  explicit MpiRuntime(MpiCollectives collectives = MpiCollectives::kBlocking);
  ~MpiRuntime();
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  /// Marks the run as failed: MPI_Finalize will be skipped.
  void abandon() { abandoned_ = true; }
  /// Deadlines for blocking collectives; null when the library lacks
  /// MPI_THREAD_MULTIPLE (then collectives are non-blocking and polled).
  MpiWatchdog* watchdog() { return watchdog_.get(); }

 private:
  std::unique_ptr<MpiWatchdog> watchdog_;
  int rank_ = 0;
  int size_ = 1;
  int uncaught_at_start_ = 0;
  bool abandoned_ = false;
};

class MpiCommunicator : public Communicator {
 public:
  /// A private duplicate of MPI_COMM_WORLD. `runtime` must outlive this.
  MpiCommunicator(MpiRuntime& runtime, std::chrono::milliseconds timeout);
  ~MpiCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  bool concurrent_point_to_point() const override;
  std::string backend() const override { return "mpi"; }
  std::chrono::milliseconds timeout() const override { return timeout_; }
  void allreduce(torch::Tensor& tensor, ReduceOp op) override;
  void broadcast(torch::Tensor& tensor, int root) override;
  void allgather_into(const torch::Tensor& input, torch::Tensor& output) override;
  void reduce_scatter(const torch::Tensor& input, torch::Tensor& output, ReduceOp op) override;
  void barrier() override;
  std::unique_ptr<Request> isend(const torch::Tensor& tensor, int dst, uint32_t tag) override;
  std::unique_ptr<Request> irecv(torch::Tensor& tensor, int src, uint32_t tag) override;
  /// MPI_Comm_split, after an exchange that checks every rank is alive.
  std::unique_ptr<Communicator> split(int color, int key) override;

  struct Impl;

 private:
  MpiCommunicator(std::unique_ptr<Impl> impl, std::chrono::milliseconds timeout);

  int rank_;
  int size_;
  std::chrono::milliseconds timeout_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dlscale::comm
