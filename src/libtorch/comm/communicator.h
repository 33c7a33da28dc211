#pragma once
// The collective-communication seam. Strategies and the trainer talk to a
// Communicator and never name a backend (gloo, mpi, nccl, inproc).
//
// Tensors are contiguous tensors on the backend's device() (CPU for gloo, mpi
// and inproc; the rank's GPU for nccl) of float32, float16 or bfloat16 (for
// the reductions and reduce_scatter) or any dtype (broadcast, allgather,
// send/recv move bytes).
// The communicator a job hands out is a StagedCommunicator, which accepts
// tensors on any device.
// Every blocking call gives up after the communicator's timeout and throws
// dlscale::PeerFailure naming the operation, this rank and the peer(s) waited
// on; a dead peer or closed connection is a PeerFailure too. Bad arguments
// throw dlscale::Error. A Communicator is used by one thread at a time;
// collective calls are made in the same order on every rank.
#include <torch/torch.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace dlscale::comm {

enum class ReduceOp { kSum, kAverage };

/// A pending non-blocking point-to-point operation. Its tensor must stay
/// alive and untouched until wait() returns.
class Request {
 public:
  virtual ~Request() = default;
  /// Blocks until the operation is done or the communicator's timeout has
  /// passed (then throws dlscale::PeerFailure).
  virtual void wait() = 0;
};

/// Where each rank of a communicator goes in split(): ranks with the same
/// colour form one group, ordered by key (then by rank).
struct SplitPlan {
  int group_rank = -1;  ///< this rank's rank in its group; -1 when colour < 0
  int group_size = 0;
  int split_index = 0;  ///< how many splits this communicator made before
  int color = -1;
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// "gloo", "mpi", "inproc", "nccl".
  virtual std::string backend() const = 0;
  /// Where this backend's tensors must live.
  virtual torch::Device device() const { return torch::kCPU; }
  /// The limit on every blocking call.
  virtual std::chrono::milliseconds timeout() const = 0;

  /// In place: every rank ends with the elementwise sum (or average) of all
  /// ranks' `tensor`. float32/float16/bfloat16; half types sum in float32.
  virtual void allreduce(torch::Tensor& tensor, ReduceOp op) = 0;
  /// In place: every rank ends with `root`'s `tensor`.
  virtual void broadcast(torch::Tensor& tensor, int root) = 0;
  /// Returns [size, ...input shape]: row r is rank r's `input` (allocates,
  /// then allgather_into()).
  torch::Tensor allgather(const torch::Tensor& input);
  /// The flat allgather of equal shards: `output` (contiguous, input's dtype,
  /// size() * input.numel() elements) ends with rank r's `input` as its r-th
  /// chunk. `input` may be this rank's own chunk of `output` (in place), as a
  /// sharded strategy gathers its parameters.
  virtual void allgather_into(const torch::Tensor& input, torch::Tensor& output) = 0;
  /// The flat reduce-scatter: `input` (float32/float16/bfloat16, numel a
  /// multiple of size()) is size() equal chunks; `output` (input's dtype,
  /// input.numel() / size() elements, not overlapping `input`) ends with the
  /// elementwise sum (or average) over ranks of their chunk rank(). Half
  /// types sum in float32.
  virtual void reduce_scatter(const torch::Tensor& input, torch::Tensor& output, ReduceOp op) = 0;
  virtual void barrier() = 0;
  /// Non-blocking point to point; `tag` (< 2^24) must match between sender
  /// and receiver; messages with the same peer and tag arrive in order.
  virtual std::unique_ptr<Request> isend(const torch::Tensor& tensor, int dst, uint32_t tag) = 0;
  virtual std::unique_ptr<Request> irecv(torch::Tensor& tensor, int src, uint32_t tag) = 0;
  /// Blocking point to point.
  void send(const torch::Tensor& tensor, int dst, uint32_t tag) { isend(tensor, dst, tag)->wait(); }
  void recv(torch::Tensor& tensor, int src, uint32_t tag) { irecv(tensor, src, tag)->wait(); }

  /// Collective: a new communicator of the ranks that passed the same
  /// `color`, ranked by `key` (ties by rank), sharing this one's backend and
  /// timeout; nullptr on ranks that passed a negative colour (MPI_Comm_split's
  /// MPI_UNDEFINED). How strategies form node-local and node-leader groups.
  virtual std::unique_ptr<Communicator> split(int color, int key) = 0;

  /// Whether several threads may use isend/irecv/wait at once (with
  /// distinct peer-tag pairs; collectives stay one thread at a time): true
  /// for gloo and inproc, and for mpi when the library granted
  /// MPI_THREAD_MULTIPLE (--mpi-collectives blocking). The parameter
  /// server's shards serve their links from one thread per worker.
  virtual bool concurrent_point_to_point() const { return true; }

 protected:
  /// The collective part of split() every backend shares: exchanges colours
  /// and keys (with this communicator's timeout) and computes the plan.
  SplitPlan plan_split(int color, int key);

 private:
  int splits_ = 0;
};

/// Throws dlscale::Error unless `tag` fits the 24 bits every backend allows.
void check_tag(uint32_t tag, const char* op);

/// Throws dlscale::Error unless `t` is a contiguous tensor on `device` (the
/// backend's: CPU, or the rank's GPU for nccl); and, when `reducible`, of
/// dtype float32, float16 or bfloat16.
void check_comm_tensor(const torch::Tensor& t, const char* op, bool reducible,
                       const torch::Device& device = torch::kCPU);

/// Throws dlscale::Error unless `whole` and `chunk` are contiguous tensors of
/// one dtype on `device` with whole.numel() == ranks * chunk.numel() (the
/// shapes of allgather_into and reduce_scatter).
void check_comm_chunks(const torch::Tensor& whole, const torch::Tensor& chunk, int ranks,
                       const char* op, bool reducible, const torch::Device& device = torch::kCPU);

/// Whether `chunk` is chunk `rank` of `whole` (an in-place allgather).
bool is_own_chunk(const torch::Tensor& whole, const torch::Tensor& chunk, int rank);

}  // namespace dlscale::comm
