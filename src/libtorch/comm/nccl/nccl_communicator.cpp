#include "libtorch/comm/nccl/nccl_communicator.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <functional>
#include <memory>
#include <thread>
#include <utility>

#include "core/error.h"

namespace dlscale::comm {
namespace {

void check_cuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw Error(fmt::format("nccl: CUDA {} failed: {}", what, cudaGetErrorString(status)));
}

std::string to_hex(const void* data, size_t n) {
  static const char* const kDigits = "0123456789abcdef";
  std::string out;
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    out += kDigits[p[i] >> 4];
    out += kDigits[p[i] & 15];
  }
  return out;
}

void from_hex(const std::string& hex, void* data, size_t n) {
  DLSCALE_CHECK(hex.size() == 2 * n, "nccl: malformed unique id in the rendezvous store");
  auto* p = static_cast<unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<unsigned char>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
}

ncclDataType_t reduce_type(torch::ScalarType t) {
  switch (t) {
    case torch::kFloat32: return ncclFloat32;
    case torch::kFloat16: return ncclFloat16;
    case torch::kBFloat16: return ncclBfloat16;
    default: throw Error(fmt::format("nccl: dtype {} cannot be reduced", c10::toString(t)));
  }
}

size_t byte_count(const torch::Tensor& t) { return static_cast<size_t>(t.numel()) * t.element_size(); }

/// Restores the calling thread's current device on scope exit (the
/// communication thread starts on device 0).
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    check_cuda(cudaGetDevice(&previous_), "cudaGetDevice");
    if (previous_ != device) check_cuda(cudaSetDevice(device), "cudaSetDevice");
  }
  ~DeviceScope() { cudaSetDevice(previous_); }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = 0;
};

}  // namespace

/// The NCCL communicator, its stream and its failure state, shared with
/// pending requests.
class NcclState {
 public:
  NcclState(int gpu, int comm_rank, int comm_size) : device(gpu), rank(comm_rank), size(comm_size) {
    DeviceScope scope(device);
    check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  }
  ~NcclState() {
    DeviceScope scope(device);
    if (comm != nullptr) {
      if (aborted) {
        // ncclCommAbort already freed it.
      } else {
        ncclCommDestroy(comm);
      }
    }
    if (stream != nullptr) cudaStreamDestroy(stream);
  }
  NcclState(const NcclState&) = delete;
  NcclState& operator=(const NcclState&) = delete;

  /// "nccl OP: rank R of N: <NCCL's error>[: <its last message>]".
  std::string describe(ncclResult_t r, const char* op) const {
    const char* last = comm != nullptr && !aborted ? ncclGetLastError(comm) : "";
    return fmt::format("nccl {}: rank {} of {}: {}{}{}", op, rank, size, ncclGetErrorString(r),
                       *last ? ": " : "", last);
  }

  void check_result(ncclResult_t r, const char* op) {
    if (r == ncclSuccess || r == ncclInProgress) return;
    throw PeerFailure(describe(r, op));
  }

  /// Queues `enqueue` on our stream after the work LibTorch has queued so
  /// far; returns an event that completes with it.
  cudaEvent_t launch(const std::function<ncclResult_t(cudaStream_t)>& enqueue, const char* op) {
    DLSCALE_CHECK(!aborted, "nccl {}: rank {}'s communicator was aborted after an earlier failure", op, rank);
    DeviceScope scope(device);
    cudaEvent_t ready = nullptr;
    cudaEvent_t done = nullptr;
    check_cuda(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), "cudaEventCreate");
    const cudaError_t recorded = cudaEventRecord(ready, nullptr);  // LibTorch's default stream
    const cudaError_t waited =
        recorded == cudaSuccess ? cudaStreamWaitEvent(stream, ready, 0) : recorded;
    cudaEventDestroy(ready);  // the wait keeps what it needs
    check_cuda(waited, "cudaStreamWaitEvent");
    check_result(enqueue(stream), op);
    check_cuda(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "cudaEventCreate");
    const cudaError_t marked = cudaEventRecord(done, stream);
    if (marked != cudaSuccess) cudaEventDestroy(done);
    check_cuda(marked, "cudaEventRecord");
    return done;
  }

  /// Waits on the host for `done` (and destroys it); aborts the communicator
  /// and throws PeerFailure when NCCL reports an error or `timeout` passes.
  void wait(cudaEvent_t done, const char* op, std::chrono::milliseconds timeout) {
    DeviceScope scope(device);
    const std::unique_ptr<CUevent_st, cudaError_t (*)(cudaEvent_t)> owned(done, cudaEventDestroy);
    const auto start = std::chrono::steady_clock::now();
    for (int spins = 0;; ++spins) {
      const cudaError_t q = cudaEventQuery(done);
      if (q == cudaSuccess) return;
      if (q != cudaErrorNotReady) check_cuda(q, "cudaEventQuery");
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(comm, &async);
      if (async != ncclSuccess && async != ncclInProgress) {
        const std::string why = describe(async, op);  // before the abort frees the communicator
        abort();
        throw PeerFailure(why + "; communicator aborted");
      }
      if (std::chrono::steady_clock::now() - start > timeout) {
        abort();
        throw PeerFailure(fmt::format(
            "nccl {}: rank {} of {} waited {:.0f} s for its peers; communicator aborted", op, rank,
            size, std::chrono::duration<double>(timeout).count()));
      }
      if (spins < 1000) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    }
  }

  /// A blocking operation: launch, then wait.
  void run(const char* op, const std::function<ncclResult_t(cudaStream_t)>& enqueue,
           std::chrono::milliseconds timeout) {
    wait(launch(enqueue, op), op, timeout);
  }

  void abort() {
    if (aborted) return;
    aborted = true;
    ncclCommAbort(comm);
  }

  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  int device;
  int rank;
  int size;
  bool aborted = false;
};

namespace {

class NcclRequest : public Request {
 public:
  NcclRequest(std::shared_ptr<NcclState> state, cudaEvent_t done, const char* op,
              std::chrono::milliseconds timeout, torch::Tensor keep)
      : state_(std::move(state)), done_(done), op_(op), timeout_(timeout), keep_(std::move(keep)) {}
  ~NcclRequest() override {
    if (done_ != nullptr) cudaEventDestroy(done_);
  }
  void wait() override {
    if (done_ == nullptr) return;
    cudaEvent_t done = std::exchange(done_, nullptr);
    state_->wait(done, op_, timeout_);
  }

 private:
  std::shared_ptr<NcclState> state_;
  cudaEvent_t done_;
  const char* op_;
  std::chrono::milliseconds timeout_;
  torch::Tensor keep_;  ///< alive until the stream is done with it
};

}  // namespace

NcclCommunicator::NcclCommunicator(TcpStore& store, int rank, int size, const NcclOptions& options)
    : state_(std::make_shared<NcclState>(options.device, rank, size)),
      rank_(rank),
      size_(size),
      options_(options) {
  ncclUniqueId id;
  const std::string key = options.prefix + "/unique-id";
  if (rank == 0) {
    state_->check_result(ncclGetUniqueId(&id), "bootstrap");
    store.set(key, to_hex(&id, sizeof(id)));
  } else {
    from_hex(store.get(key), &id, sizeof(id));
  }
  DeviceScope scope(options.device);
  state_->check_result(ncclCommInitRank(&state_->comm, size, id, rank), "init");
}

NcclCommunicator::NcclCommunicator(std::shared_ptr<NcclState> state, int rank, int size,
                                   const NcclOptions& options)
    : state_(std::move(state)), rank_(rank), size_(size), options_(options) {}

NcclCommunicator::~NcclCommunicator() = default;

std::string NcclCommunicator::library_version() {
  int v = 0;
  ncclGetVersion(&v);
  return fmt::format("{}.{}.{}", v / 10000, v / 100 % 100, v % 100);
}

torch::Device NcclCommunicator::device() const {
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(options_.device));
}


void NcclCommunicator::allreduce(torch::Tensor& tensor, ReduceOp op) {
  check_comm_tensor(tensor, "allreduce", /*reducible=*/true, device());
  void* p = tensor.data_ptr();
  const auto type = reduce_type(tensor.scalar_type());
  const auto n = static_cast<size_t>(tensor.numel());
  ncclComm_t comm = state_->comm;
  const ncclRedOp_t red = op == ReduceOp::kSum ? ncclSum : ncclAvg;
  state_->run(
      "allreduce", [&](cudaStream_t s) { return ncclAllReduce(p, p, n, type, red, comm, s); },
      options_.timeout);
}

void NcclCommunicator::broadcast(torch::Tensor& tensor, int root) {
  check_comm_tensor(tensor, "broadcast", /*reducible=*/false, device());
  DLSCALE_CHECK(root >= 0 && root < size_, "broadcast: root {} is not a rank of {}", root, size_);
  void* p = tensor.data_ptr();
  const size_t n = byte_count(tensor);
  ncclComm_t comm = state_->comm;
  state_->run(
      "broadcast", [&](cudaStream_t s) { return ncclBroadcast(p, p, n, ncclUint8, root, comm, s); },
      options_.timeout);
}

void NcclCommunicator::allgather_into(const torch::Tensor& input, torch::Tensor& output) {
  check_comm_chunks(output, input, size_, "allgather", /*reducible=*/false, device());
  // In place when input is this rank's chunk of output, as NCCL allows.
  const void* in = input.data_ptr();
  void* o = output.data_ptr();
  const size_t n = byte_count(input);
  ncclComm_t comm = state_->comm;
  state_->run(
      "allgather", [&](cudaStream_t s) { return ncclAllGather(in, o, n, ncclUint8, comm, s); },
      options_.timeout);
}

void NcclCommunicator::reduce_scatter(const torch::Tensor& input, torch::Tensor& output,
                                      ReduceOp op) {
  check_comm_chunks(input, output, size_, "reduce_scatter", /*reducible=*/true, device());
  const void* in = input.data_ptr();
  void* o = output.data_ptr();
  const auto type = reduce_type(input.scalar_type());
  const auto n = static_cast<size_t>(output.numel());
  ncclComm_t comm = state_->comm;
  const ncclRedOp_t red = op == ReduceOp::kSum ? ncclSum : ncclAvg;
  state_->run(
      "reduce_scatter",
      [&](cudaStream_t s) { return ncclReduceScatter(in, o, n, type, red, comm, s); },
      options_.timeout);
}

void NcclCommunicator::barrier() {
  torch::Tensor one = torch::ones({1}, torch::TensorOptions().dtype(torch::kFloat32).device(device()));
  allreduce(one, ReduceOp::kSum);
}

std::unique_ptr<Request> NcclCommunicator::isend(const torch::Tensor& tensor, int dst, uint32_t tag) {
  check_tag(tag, "isend");
  check_comm_tensor(tensor, "isend", /*reducible=*/false, device());
  DLSCALE_CHECK(dst >= 0 && dst < size_ && dst != rank_, "isend: bad destination rank {}", dst);
  const void* p = tensor.data_ptr();
  const size_t n = byte_count(tensor);
  ncclComm_t comm = state_->comm;
  cudaEvent_t done =
      state_->launch([&](cudaStream_t s) { return ncclSend(p, n, ncclUint8, dst, comm, s); }, "send");
  return std::make_unique<NcclRequest>(state_, done, "send", options_.timeout, tensor);
}

std::unique_ptr<Request> NcclCommunicator::irecv(torch::Tensor& tensor, int src, uint32_t tag) {
  check_tag(tag, "irecv");
  check_comm_tensor(tensor, "irecv", /*reducible=*/false, device());
  DLSCALE_CHECK(src >= 0 && src < size_ && src != rank_, "irecv: bad source rank {}", src);
  void* p = tensor.data_ptr();
  const size_t n = byte_count(tensor);
  ncclComm_t comm = state_->comm;
  cudaEvent_t done =
      state_->launch([&](cudaStream_t s) { return ncclRecv(p, n, ncclUint8, src, comm, s); }, "recv");
  return std::make_unique<NcclRequest>(state_, done, "recv", options_.timeout, tensor);
}

std::unique_ptr<Communicator> NcclCommunicator::split(int color, int key) {
  const SplitPlan plan = plan_split(color, key);
  auto child = std::make_shared<NcclState>(options_.device, plan.group_rank, plan.group_size);
  {
    DeviceScope scope(options_.device);
    state_->check_result(ncclCommSplit(state_->comm, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key,
                                       &child->comm, nullptr),
                         "split");
  }
  if (color < 0) return nullptr;
  NcclOptions o = options_;
  o.prefix = fmt::format("{}/split{}", options_.prefix, plan.split_index);
  return std::unique_ptr<Communicator>(
      new NcclCommunicator(std::move(child), plan.group_rank, plan.group_size, o));
}

}  // namespace dlscale::comm
