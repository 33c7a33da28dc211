#pragma once
// The collective-communication seam. Strategies and the trainer talk to a
// Communicator and never name a backend (gloo, mpi, inproc; nccl later).
//
// Tensors are contiguous CPU tensors of float32, float16 or bfloat16 (for the
// reductions) or any dtype (broadcast, allgather, send/recv move bytes).
// Every blocking call gives up after the communicator's timeout and throws
// dlscale::Error naming the operation, this rank and the peer(s) waited on.
// A Communicator is used by one thread at a time; calls are collective in the
// same order on every rank.
#include <torch/torch.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace dlscale::comm {

enum class ReduceOp { kSum, kAverage };

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// "gloo", "mpi", "inproc".
  virtual std::string backend() const = 0;
  /// The limit on every blocking call.
  virtual std::chrono::milliseconds timeout() const = 0;

  /// In place: every rank ends with the elementwise sum (or average) of all
  /// ranks' `tensor`. float32/float16/bfloat16; half types sum in float32.
  virtual void allreduce(torch::Tensor& tensor, ReduceOp op) = 0;
  /// In place: every rank ends with `root`'s `tensor`.
  virtual void broadcast(torch::Tensor& tensor, int root) = 0;
  /// Returns [size, ...input shape]: row r is rank r's `input`.
  virtual torch::Tensor allgather(const torch::Tensor& input) = 0;
  virtual void barrier() = 0;
  /// Point to point; `tag` must match between sender and receiver.
  virtual void send(const torch::Tensor& tensor, int dst, uint32_t tag) = 0;
  virtual void recv(torch::Tensor& tensor, int src, uint32_t tag) = 0;
};

/// Throws dlscale::Error unless `t` is a contiguous CPU tensor; and, when
/// `reducible`, of dtype float32, float16 or bfloat16.
void check_comm_tensor(const torch::Tensor& t, const char* op, bool reducible);

}  // namespace dlscale::comm
