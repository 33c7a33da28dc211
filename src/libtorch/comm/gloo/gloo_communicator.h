#pragma once
// Gloo over TCP: the embedded default backend. Bootstraps through the
// rendezvous TcpStore; needs no launcher.
#include <memory>
#include <string>

#include "libtorch/comm/communicator.h"
#include "comm/tcp_store.h"

namespace gloo {
class Context;
}

namespace dlscale::comm {

struct GlooOptions {
  std::string hostname = "127.0.0.1";  ///< address this rank's Gloo device listens on
  std::chrono::milliseconds timeout{60000};
  std::string prefix = "gloo";         ///< store key namespace (one per communicator)
};

class GlooCommunicator : public Communicator {
 public:
  /// Connects the full mesh of `size` ranks through `store`. Throws
  /// dlscale::Error naming the rank and the cause when peers do not arrive.
  GlooCommunicator(TcpStore& store, int rank, int size, const GlooOptions& options);
  ~GlooCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "gloo"; }
  std::chrono::milliseconds timeout() const override { return timeout_; }
  void allreduce(torch::Tensor& tensor, ReduceOp op) override;
  void broadcast(torch::Tensor& tensor, int root) override;
  void allgather_into(const torch::Tensor& input, torch::Tensor& output) override;
  void reduce_scatter(const torch::Tensor& input, torch::Tensor& output, ReduceOp op) override;
  void barrier() override;
  std::unique_ptr<Request> isend(const torch::Tensor& tensor, int dst, uint32_t tag) override;
  std::unique_ptr<Request> irecv(torch::Tensor& tensor, int src, uint32_t tag) override;
  /// A new full mesh of the group's ranks, bootstrapped through the same
  /// store under its own key prefix; the store must outlive it.
  std::unique_ptr<Communicator> split(int color, int key) override;

 private:
  uint32_t next_tag() { return tag_++; }

  TcpStore& store_;
  GlooOptions options_;
  int rank_;
  int size_;
  std::chrono::milliseconds timeout_;
  std::shared_ptr<gloo::Context> context_;
  uint32_t tag_ = 0;
};

}  // namespace dlscale::comm
