#pragma once
// NCCL on the GPUs (docs/gpu.md, "NCCL"): tensors are contiguous CUDA tensors
// on this rank's device (StagedCommunicator brings others there). Rank 0's
// unique id travels through the rendezvous TcpStore. Every operation waits
// for the work already queued on LibTorch's compute stream (an event), runs
// on the communicator's own stream, and the calling thread then waits for it
// on the host with the communicator's timeout: the compute stream keeps
// running meanwhile, so bucketed allreduce overlaps backward as on CPUs. A
// call that does not finish in time aborts the communicator (ncclCommAbort)
// and throws PeerFailure naming this rank; the communicator is unusable after.
#include <memory>
#include <string>

#include "libtorch/comm/communicator.h"
#include "comm/tcp_store.h"

namespace dlscale::comm {

struct NcclOptions {
  int device = 0;                            ///< this rank's GPU
  std::chrono::milliseconds timeout{60000};  ///< every operation, and the bootstrap
  std::string prefix = "nccl";               ///< store key namespace
};

class NcclState;

class NcclCommunicator : public Communicator {
 public:
  /// Creates the NCCL communicator of `size` ranks through `store` (rank 0
  /// publishes the unique id). Throws dlscale::Error on NCCL/CUDA errors.
  NcclCommunicator(TcpStore& store, int rank, int size, const NcclOptions& options);
  ~NcclCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "nccl"; }
  torch::Device device() const override;
  std::chrono::milliseconds timeout() const override { return options_.timeout; }
  /// One stream serialises point-to-point operations in call order.
  bool concurrent_point_to_point() const override { return false; }

  void allreduce(torch::Tensor& tensor, ReduceOp op) override;
  void broadcast(torch::Tensor& tensor, int root) override;
  void allgather_into(const torch::Tensor& input, torch::Tensor& output) override;
  void reduce_scatter(const torch::Tensor& input, torch::Tensor& output, ReduceOp op) override;
  void barrier() override;
  std::unique_ptr<Request> isend(const torch::Tensor& tensor, int dst, uint32_t tag) override;
  std::unique_ptr<Request> irecv(torch::Tensor& tensor, int src, uint32_t tag) override;
  /// ncclCommSplit of this communicator.
  std::unique_ptr<Communicator> split(int color, int key) override;

  /// The NCCL library's version ("2.28.3").
  static std::string library_version();

 private:
  NcclCommunicator(std::shared_ptr<NcclState> state, int rank, int size, const NcclOptions& options);

  std::shared_ptr<NcclState> state_;
  int rank_;
  int size_;
  NcclOptions options_;
};

}  // namespace dlscale::comm
