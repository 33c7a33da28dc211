#pragma once
// A Communicator that accepts tensors on any device and hands its backend
// only tensors on the backend's own device: Gloo and MPI move CPU memory,
// NCCL GPU memory. A tensor elsewhere (a CUDA gradient bucket for Gloo, the
// trainer's CPU timing table for NCCL) is copied there, the operation runs on
// the copy and the result is copied back (docs/gpu.md, "Backends").
#include <atomic>
#include <memory>

#include "libtorch/comm/communicator.h"

namespace dlscale::comm {

class StagedCommunicator : public Communicator {
 public:
  /// Forwards to `inner`, staging through its device().
  explicit StagedCommunicator(std::unique_ptr<Communicator> inner);

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::string backend() const override { return inner_->backend(); }
  std::chrono::milliseconds timeout() const override { return inner_->timeout(); }
  torch::Device device() const override { return native_; }
  bool concurrent_point_to_point() const override { return inner_->concurrent_point_to_point(); }

  void allreduce(torch::Tensor& tensor, ReduceOp op) override;
  void broadcast(torch::Tensor& tensor, int root) override;
  void allgather_into(const torch::Tensor& input, torch::Tensor& output) override;
  void reduce_scatter(const torch::Tensor& input, torch::Tensor& output, ReduceOp op) override;
  void barrier() override { inner_->barrier(); }
  std::unique_ptr<Request> isend(const torch::Tensor& tensor, int dst, uint32_t tag) override;
  std::unique_ptr<Request> irecv(torch::Tensor& tensor, int src, uint32_t tag) override;
  std::unique_ptr<Communicator> split(int color, int key) override;

  /// Bytes copied to and from the backend's device so far (staging cost).
  int64_t staged_bytes() const { return staged_bytes_.load(); }

 private:
  /// `t` itself when it is already on the native device, else a copy there.
  torch::Tensor to_native(const torch::Tensor& t);

  std::unique_ptr<Communicator> inner_;
  torch::Device native_;
  std::atomic<int64_t> staged_bytes_{0};  ///< point to point may run on several threads
};

}  // namespace dlscale::comm
