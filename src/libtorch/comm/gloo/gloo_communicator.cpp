#include "libtorch/comm/gloo/gloo_communicator.h"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/types.h>
#include <gloo/common/error.h>
#include <gloo/common/logging.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

#include "libtorch/comm/reduce_kernels.h"
#include "core/error.h"

namespace dlscale::comm {

/// The largest message two ranks sum with Gloo's bcube instead of its ring.
constexpr size_t kBcubeMaxBytes = 16u << 20;
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
    throw PeerFailure(
        fmt::format("rank {}: gloo {} failed: {}", rank, op, msg.substr(0, msg.find('\n'))));
  } catch (const gloo::EnforceNotMet& e) {
    // A broken invariant inside Gloo: at rendezvous, a malformed address
    // under a Gloo key of the store (which only the job's processes can write).
    std::string msg = e.what();
    throw PeerFailure(fmt::format("rank {}: gloo {} got inconsistent data from a peer: {}", rank,
                                  op, msg.substr(0, msg.find('\n'))));
  }
}

/// A pending Gloo send or receive of an unbound buffer.
class GlooRequest : public Request {
 public:
  GlooRequest(std::unique_ptr<gloo::transport::UnboundBuffer> buffer, bool is_send, int rank,
              int peer, std::chrono::milliseconds timeout)
      : buffer_(std::move(buffer)), is_send_(is_send), rank_(rank), peer_(peer), timeout_(timeout) {}
  void wait() override {
    if (!buffer_) return;
    bool done = false;
    const char* op = is_send_ ? "send" : "recv";
    guarded(rank_, op, [&] { done = is_send_ ? buffer_->waitSend(timeout_) : buffer_->waitRecv(timeout_); });
    buffer_.reset();
    if (!done) {
      throw PeerFailure(fmt::format("rank {}: gloo {} {} rank {} was aborted", rank_, op,
                                    is_send_ ? "to" : "from", peer_));
    }
  }

 private:
  std::unique_ptr<gloo::transport::UnboundBuffer> buffer_;
  bool is_send_;
  int rank_;
  int peer_;
  std::chrono::milliseconds timeout_;
};

/// The slot prefix of dlscale's ring reduce-scatter: apart from Gloo's own
/// collectives (0x01-0x08) and from point-to-point tags (prefix 0).
constexpr uint8_t kReduceScatterSlotPrefix = 0x40;

/// A 2-byte element for Gloo's byte accounting of float16/bfloat16 buffers.
struct Half16 {
  uint16_t bits;
};

}  // namespace

GlooCommunicator::GlooCommunicator(TcpStore& store, int rank, int size,
                                   const GlooOptions& options)
    : store_(store), options_(options), rank_(rank), size_(size), timeout_(options.timeout) {
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
    // Two ranks and up to 16 MiB: Gloo's bcube makes the ring's two
    // exchanges of halves in fewer, larger messages and took 0.42-0.92 of
    // the ring's time; from 32 MiB the ring's pipelined segments win
    // (bench/README.md, "Gloo's bcube for two ranks"). More ranks: the
    // ring, whose steps and bytes the predictor models.
    const bool bcube = size_ == 2 && n * tensor.element_size() <= kBcubeMaxBytes;
    opts.setAlgorithm(bcube ? gloo::AllreduceOptions::Algorithm::BCUBE
                            : gloo::AllreduceOptions::Algorithm::RING);
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

void GlooCommunicator::allgather_into(const torch::Tensor& input, torch::Tensor& output) {
  check_comm_chunks(output, input, size_, "allgather", /*reducible=*/false);
  const size_t bytes = static_cast<size_t>(input.numel()) * input.element_size();
  const bool in_place = is_own_chunk(output, input, rank_);
  if (size_ == 1) {
    if (!in_place) output.copy_(input.view_as(output));
    return;
  }
  gloo::AllgatherOptions opts(context_);
  // Without an input Gloo gathers in place: this rank's chunk is already there.
  if (!in_place) opts.setInput(static_cast<uint8_t*>(input.data_ptr()), bytes);
  opts.setOutput(static_cast<uint8_t*>(output.data_ptr()), bytes * size_);
  opts.setTag(next_tag());
  opts.setTimeout(timeout_);
  guarded(rank_, "allgather", [&] { gloo::allgather(opts); });
}

void GlooCommunicator::reduce_scatter(const torch::Tensor& input, torch::Tensor& output,
                                      ReduceOp op) {
  check_comm_chunks(input, output, size_, "reduce_scatter", /*reducible=*/true);
  const torch::Tensor in = input.reshape({-1});
  const int64_t n = output.numel();
  auto chunk = [&](int c) { return in.narrow(0, (c % size_ + size_) % size_ * n, n); };
  if (size_ == 1 || n == 0) {
    output.copy_(in.view_as(output));
  } else {
    // A ring over Gloo's pairs, as the first half of a ring allreduce (Gloo's
    // own reduce-scatter, halving-doubling, sends more than (p-1)/p of the
    // input outside powers of two and when it redistributes). At step s rank
    // r sends its running sum of chunk r-s-1 to r+1 and adds its own part of
    // chunk r-s-2, received from r-1; after p-1 steps it holds chunk r.
    const uint64_t slot = gloo::Slot::build(kReduceScatterSlotPrefix, next_tag());
    const int right = (rank_ + 1) % size_, left = (rank_ + size_ - 1) % size_;
    const size_t bytes = static_cast<size_t>(n) * in.element_size();
    torch::Tensor incoming = torch::empty({n}, in.options());
    torch::Tensor sum = torch::empty({n}, in.options());
    torch::Tensor sending = chunk(rank_ - 1);
    guarded(rank_, "reduce_scatter", [&] {
      for (int step = 0; step < size_ - 1; ++step) {
        auto send = context_->createUnboundBuffer(sending.data_ptr(), bytes);
        auto recv = context_->createUnboundBuffer(incoming.data_ptr(), bytes);
        recv->recv(left, slot);
        send->send(right, slot);
        if (!recv->waitRecv(timeout_) || !send->waitSend(timeout_)) {
          throw PeerFailure(fmt::format("rank {}: gloo reduce_scatter was aborted", rank_));
        }
        sum_into(in.scalar_type(), sum.data_ptr(), incoming.data_ptr(), chunk(rank_ - step - 2).data_ptr(),
                 static_cast<size_t>(n));
        sending = sum;  // its send completed: the next step may overwrite it
      }
    });
    output.copy_(sending.view_as(output));
  }
  if (op == ReduceOp::kAverage) output.div_(size_);
}

void GlooCommunicator::barrier() {
  if (size_ == 1) return;
  gloo::BarrierOptions opts(context_);
  opts.setTag(next_tag());
  opts.setTimeout(timeout_);
  guarded(rank_, "barrier", [&] { gloo::barrier(opts); });
}

std::unique_ptr<Request> GlooCommunicator::isend(const torch::Tensor& tensor, int dst,
                                                 uint32_t tag) {
  check_comm_tensor(tensor, "send", /*reducible=*/false);
  check_tag(tag, "send");
  DLSCALE_CHECK(dst >= 0 && dst < size_ && dst != rank_, "send: bad destination rank {}", dst);
  std::unique_ptr<gloo::transport::UnboundBuffer> buf;
  guarded(rank_, "send", [&] {
    buf = context_->createUnboundBuffer(tensor.data_ptr(), tensor.numel() * tensor.element_size());
    buf->send(dst, tag);
  });
  return std::make_unique<GlooRequest>(std::move(buf), true, rank_, dst, timeout_);
}

std::unique_ptr<Request> GlooCommunicator::irecv(torch::Tensor& tensor, int src, uint32_t tag) {
  check_comm_tensor(tensor, "recv", /*reducible=*/false);
  check_tag(tag, "recv");
  DLSCALE_CHECK(src >= 0 && src < size_ && src != rank_, "recv: bad source rank {}", src);
  std::unique_ptr<gloo::transport::UnboundBuffer> buf;
  guarded(rank_, "recv", [&] {
    buf = context_->createUnboundBuffer(tensor.data_ptr(), tensor.numel() * tensor.element_size());
    buf->recv(src, tag);
  });
  return std::make_unique<GlooRequest>(std::move(buf), false, rank_, src, timeout_);
}

std::unique_ptr<Communicator> GlooCommunicator::split(int color, int key) {
  const SplitPlan plan = plan_split(color, key);
  if (plan.group_rank < 0) return nullptr;
  GlooOptions sub = options_;
  sub.prefix = fmt::format("{}/split{}/color{}", options_.prefix, plan.split_index, plan.color);
  return std::make_unique<GlooCommunicator>(store_, plan.group_rank, plan.group_size, sub);
}

}  // namespace dlscale::comm
