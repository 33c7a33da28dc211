#include "comm/gloo/gloo_communicator.h"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

#include "comm/reduce_kernels.h"
#include "core/error.h"

namespace dlscale::comm {
namespace {

/// Lets Gloo's rendezvous use our TcpStore.
class StoreAdapter : public gloo::rendezvous::Store {
 public:
  explicit StoreAdapter(TcpStore& store) : store_(store) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    store_.set(key, std::string(data.begin(), data.end()));
  }
  std::vector<char> get(const std::string& key) override {
    const std::string v = store_.get(key);
    return std::vector<char>(v.begin(), v.end());
  }
  void wait(const std::vector<std::string>& keys) override { store_.wait(keys, store_.timeout()); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    store_.wait(keys, timeout);
  }

 private:
  TcpStore& store_;
};

/// Runs a Gloo call, turning its exceptions into one-line dlscale errors.
template <typename Fn>
void guarded(int rank, const char* op, Fn&& fn) {
  try {
    fn();
  } catch (const gloo::Exception& e) {
    std::string msg = e.what();
    // Gloo prefixes "[file:line] "; keep the cause only.
    if (const auto pos = msg.find("] "); msg.rfind('[', 0) == 0 && pos != std::string::npos) {
      msg = msg.substr(pos + 2);
    }
    throw Error(fmt::format("rank {}: gloo {} failed: {}", rank, op, msg.substr(0, msg.find('\n'))));
  }
}

/// A 2-byte element for Gloo's byte accounting of float16/bfloat16 buffers.
struct Half16 {
  uint16_t bits;
};

}  // namespace

GlooCommunicator::GlooCommunicator(TcpStore& store, int rank, int size,
                                   const GlooOptions& options)
    : rank_(rank), size_(size), timeout_(options.timeout) {
  DLSCALE_CHECK(size >= 1 && rank >= 0 && rank < size, "rank {} is outside world size {}", rank,
                size);
  gloo::transport::tcp::attr attr;
  attr.hostname = options.hostname;
  attr.ai_family = AF_INET;
  StoreAdapter adapter(store);
  gloo::rendezvous::PrefixStore prefixed(options.prefix, adapter);
  guarded(rank, "rendezvous", [&] {
    auto device = gloo::transport::tcp::CreateDevice(attr);
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
    context->setTimeout(timeout_);
    context->connectFullMesh(prefixed, device);
    context_ = std::move(context);
  });
  // connectFullMesh returns on a rank once its own pairs are up, while peers
  // may still be handshaking; a rank that then closed its context would
  // break theirs. The barrier makes the mesh complete everywhere first.
  barrier();
}

GlooCommunicator::~GlooCommunicator() = default;

void GlooCommunicator::allreduce(torch::Tensor& tensor, ReduceOp op) {
  check_comm_tensor(tensor, "allreduce", /*reducible=*/true);
  if (size_ > 1) {
    const auto dtype = tensor.scalar_type();
    const size_t n = static_cast<size_t>(tensor.numel());
    gloo::AllreduceOptions opts(context_);
    if (dtype == torch::kFloat32) {
      opts.setOutput(tensor.data_ptr<float>(), n);
    } else {
      opts.setOutput(static_cast<Half16*>(tensor.data_ptr()), n);
    }
    opts.setReduceFunction([dtype](void* c, const void* a, const void* b, size_t count) {
      sum_into(dtype, c, a, b, count);
    });
    opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
    opts.setTag(next_tag());
    opts.setTimeout(timeout_);
    guarded(rank_, "allreduce", [&] { gloo::allreduce(opts); });
  }
  if (op == ReduceOp::kAverage) tensor.div_(size_);
}

void GlooCommunicator::broadcast(torch::Tensor& tensor, int root) {
  check_comm_tensor(tensor, "broadcast", /*reducible=*/false);
  DLSCALE_CHECK(root >= 0 && root < size_, "broadcast root {} is outside world size {}", root,
                size_);
  if (size_ == 1) return;
  gloo::BroadcastOptions opts(context_);
  opts.setOutput(static_cast<uint8_t*>(tensor.data_ptr()),
                 static_cast<size_t>(tensor.numel()) * tensor.element_size());
  opts.setRoot(root);
  opts.setTag(next_tag());
  opts.setTimeout(timeout_);
  guarded(rank_, "broadcast", [&] { gloo::broadcast(opts); });
}

torch::Tensor GlooCommunicator::allgather(const torch::Tensor& input) {
  check_comm_tensor(input, "allgather", /*reducible=*/false);
  std::vector<int64_t> shape{size_};
  for (int64_t d : input.sizes()) shape.push_back(d);
  torch::Tensor out = torch::empty(shape, input.options());
  const size_t bytes = static_cast<size_t>(input.numel()) * input.element_size();
  if (size_ == 1) {
    out[0].copy_(input);
    return out;
  }
  gloo::AllgatherOptions opts(context_);
  opts.setInput(static_cast<uint8_t*>(input.data_ptr()), bytes);
  opts.setOutput(static_cast<uint8_t*>(out.data_ptr()), bytes * size_);
  opts.setTag(next_tag());
  opts.setTimeout(timeout_);
  guarded(rank_, "allgather", [&] { gloo::allgather(opts); });
  return out;
}

void GlooCommunicator::barrier() {
  if (size_ == 1) return;
  gloo::BarrierOptions opts(context_);
  opts.setTag(next_tag());
  opts.setTimeout(timeout_);
  guarded(rank_, "barrier", [&] { gloo::barrier(opts); });
}

void GlooCommunicator::send(const torch::Tensor& tensor, int dst, uint32_t tag) {
  check_comm_tensor(tensor, "send", /*reducible=*/false);
  guarded(rank_, "send", [&] {
    auto buf = context_->createUnboundBuffer(tensor.data_ptr(),
                                             tensor.numel() * tensor.element_size());
    buf->send(dst, tag);
    buf->waitSend(timeout_);
  });
}

void GlooCommunicator::recv(torch::Tensor& tensor, int src, uint32_t tag) {
  check_comm_tensor(tensor, "recv", /*reducible=*/false);
  guarded(rank_, "recv", [&] {
    auto buf = context_->createUnboundBuffer(tensor.data_ptr(),
                                             tensor.numel() * tensor.element_size());
    buf->recv(src, tag);
    buf->waitRecv(timeout_);
  });
}

}  // namespace dlscale::comm
