#include "libtorch/comm/mpi/mpi_communicator.h"

// Only the C API: Open MPI's deprecated C++ bindings need a library we do not link.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <climits>
#include <cstring>
#include <exception>
#include <thread>

#include "libtorch/comm/mpi/mpi_watchdog.h"
#include "libtorch/comm/reduce_kernels.h"
#include "core/error.h"

namespace dlscale::comm {
namespace {

void check_mpi(int rc, int rank, const char* op) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  throw PeerFailure(fmt::format("rank {}: mpi {} failed: {}", rank, op, msg));
}

// MPI user reductions for the 16-bit float types (MPI has no bfloat16).
void sum_half(void* in, void* inout, int* len, MPI_Datatype*) {
  sum_into(torch::kFloat16, inout, inout, in, static_cast<size_t>(*len));
}
void sum_bfloat16(void* in, void* inout, int* len, MPI_Datatype*) {
  sum_into(torch::kBFloat16, inout, inout, in, static_cast<size_t>(*len));
}

std::string timeout_message(int rank, const char* op, std::chrono::milliseconds timeout) {
  return fmt::format("rank {}: mpi {} timed out after {} ms (a peer died or stalled)", rank, op,
                     timeout.count());
}

int checked_count(int64_t n, int rank, const char* op) {
  DLSCALE_CHECK(n <= INT_MAX, "rank {}: mpi {}: {} elements exceed MPI's int count", rank, op, n);
  return static_cast<int>(n);
}

}  // namespace

MpiRuntime::MpiRuntime(MpiCollectives collectives)
    : uncaught_at_start_(std::uncaught_exceptions()) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  DLSCALE_ASSERT(!initialized);
  int provided = 0;
  // Collectives run on the communication thread while the main thread may
  // have issued earlier ones: calls never overlap, they do change threads
  // (SERIALIZED). MULTIPLE lets the watchdog abort a blocked collective.
  const bool blocking = collectives == MpiCollectives::kBlocking;
  MPI_Init_thread(nullptr, nullptr, blocking ? MPI_THREAD_MULTIPLE : MPI_THREAD_SERIALIZED,
                  &provided);
  DLSCALE_CHECK(provided >= MPI_THREAD_SERIALIZED,
                "this MPI library does not support MPI_THREAD_SERIALIZED (got level {})", provided);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  if (blocking && provided >= MPI_THREAD_MULTIPLE) watchdog_ = std::make_unique<MpiWatchdog>();
}

MpiRuntime::~MpiRuntime() {
  watchdog_.reset();
  if (abandoned_ || std::uncaught_exceptions() > uncaught_at_start_) return;
  MPI_Finalize();
}

struct MpiCommunicator::Impl {
  MPI_Comm comm = MPI_COMM_NULL;
  MpiWatchdog* watchdog = nullptr;  // null: collectives are non-blocking and polled
  MPI_Op op_half = MPI_OP_NULL;
  MPI_Op op_bfloat16 = MPI_OP_NULL;
  torch::Tensor scratch;  // allreduce output, grown to the largest tensor seen

  /// At least `bytes` of scratch memory.
  void* scratch_bytes(size_t bytes) {
    if (!scratch.defined() || static_cast<size_t>(scratch.numel()) < bytes) {
      scratch = torch::empty({static_cast<int64_t>(bytes)}, torch::kUInt8);
    }
    return scratch.data_ptr();
  }

  /// Polls `req` until done or the deadline. Open MPI progresses a
  /// non-blocking operation only inside MPI calls, so the loop keeps testing
  /// (as a blocking MPI call would spin) and yields between tests so that
  /// compute threads sharing the core still run; sleeping here instead
  /// stalled large allreduces to half their bandwidth.
  void wait(MPI_Request& req, int rank, const char* op, std::chrono::milliseconds timeout) {
    const auto start = std::chrono::steady_clock::now();
    int done = 0;
    while (true) {
      check_mpi(MPI_Test(&req, &done, MPI_STATUS_IGNORE), rank, op);
      if (done) return;
      if (std::chrono::steady_clock::now() - start > timeout) {
        throw PeerFailure(timeout_message(rank, op, timeout));
      }
      std::this_thread::yield();
    }
  }

  /// A collective with a deadline: `blocking()` under the watchdog, or
  /// `nonblocking(&req)` polled by wait(). Each returns an MPI error code.
  template <typename Blocking, typename NonBlocking>
  void collective(int rank, const char* op, std::chrono::milliseconds timeout, Blocking&& blocking,
                  NonBlocking&& nonblocking) {
    if (watchdog != nullptr) {
      const ArmedDeadline deadline(*watchdog, timeout, timeout_message(rank, op, timeout));
      check_mpi(blocking(), rank, op);
      return;
    }
    MPI_Request req;
    check_mpi(nonblocking(&req), rank, op);
    wait(req, rank, op, timeout);
  }
};

namespace {

/// A private duplicate of MPI_COMM_WORLD, under `runtime`'s watchdog.
std::unique_ptr<MpiCommunicator::Impl> world_impl(MpiRuntime& runtime) {
  auto impl = std::make_unique<MpiCommunicator::Impl>();
  impl->watchdog = runtime.watchdog();
  check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &impl->comm), runtime.rank(), "comm_dup");
  return impl;
}

}  // namespace

MpiCommunicator::MpiCommunicator(MpiRuntime& runtime, std::chrono::milliseconds timeout)
    : MpiCommunicator(world_impl(runtime), timeout) {}

MpiCommunicator::MpiCommunicator(std::unique_ptr<Impl> impl, std::chrono::milliseconds timeout)
    : timeout_(timeout), impl_(std::move(impl)) {
  MPI_Comm_rank(impl_->comm, &rank_);
  MPI_Comm_size(impl_->comm, &size_);
  MPI_Comm_set_errhandler(impl_->comm, MPI_ERRORS_RETURN);
  MPI_Op_create(&sum_half, /*commute=*/1, &impl_->op_half);
  MPI_Op_create(&sum_bfloat16, /*commute=*/1, &impl_->op_bfloat16);
}

MpiCommunicator::~MpiCommunicator() {
  if (std::uncaught_exceptions() > 0) return;  // peers may be gone: do not block
  MPI_Op_free(&impl_->op_half);
  MPI_Op_free(&impl_->op_bfloat16);
  MPI_Comm_free(&impl_->comm);
}

void MpiCommunicator::allreduce(torch::Tensor& tensor, ReduceOp op) {
  check_comm_tensor(tensor, "allreduce", /*reducible=*/true);
  if (size_ > 1) {
    const int n = checked_count(tensor.numel(), rank_, "allreduce");
    MPI_Datatype type = MPI_FLOAT;
    MPI_Op mpi_op = MPI_SUM;
    if (tensor.scalar_type() == torch::kFloat16) {
      type = MPI_UINT16_T;
      mpi_op = impl_->op_half;
    } else if (tensor.scalar_type() == torch::kBFloat16) {
      type = MPI_UINT16_T;
      mpi_op = impl_->op_bfloat16;
    }
    void* data = tensor.data_ptr();
    const size_t bytes = static_cast<size_t>(tensor.numel()) * tensor.element_size();
    impl_->collective(
        rank_, "allreduce", timeout_,
        [&] { return MPI_Allreduce(MPI_IN_PLACE, data, n, type, mpi_op, impl_->comm); },
        [&](MPI_Request* req) {
          // Out of place, copied back below: Open MPI's non-blocking in-place
          // allreduce ran at half the bandwidth (0.9 vs 1.8 GB/s at 64 MiB).
          return MPI_Iallreduce(data, impl_->scratch_bytes(bytes), n, type, mpi_op, impl_->comm,
                                req);
        });
    if (impl_->watchdog == nullptr) std::memcpy(data, impl_->scratch.data_ptr(), bytes);
  }
  if (op == ReduceOp::kAverage) tensor.div_(size_);
}

void MpiCommunicator::broadcast(torch::Tensor& tensor, int root) {
  check_comm_tensor(tensor, "broadcast", /*reducible=*/false);
  DLSCALE_CHECK(root >= 0 && root < size_, "broadcast root {} is outside world size {}", root,
                size_);
  const int n = checked_count(tensor.numel() * tensor.element_size(), rank_, "broadcast");
  void* data = tensor.data_ptr();
  impl_->collective(
      rank_, "broadcast", timeout_, [&] { return MPI_Bcast(data, n, MPI_BYTE, root, impl_->comm); },
      [&](MPI_Request* req) { return MPI_Ibcast(data, n, MPI_BYTE, root, impl_->comm, req); });
}

void MpiCommunicator::allgather_into(const torch::Tensor& input, torch::Tensor& output) {
  check_comm_chunks(output, input, size_, "allgather", /*reducible=*/false);
  const int n = checked_count(input.numel() * input.element_size(), rank_, "allgather");
  // MPI forbids aliased buffers: this rank's own chunk goes as MPI_IN_PLACE.
  const void* in = is_own_chunk(output, input, rank_) ? MPI_IN_PLACE : input.data_ptr();
  void* all = output.data_ptr();
  impl_->collective(
      rank_, "allgather", timeout_,
      [&] { return MPI_Allgather(in, n, MPI_BYTE, all, n, MPI_BYTE, impl_->comm); },
      [&](MPI_Request* req) {
        return MPI_Iallgather(in, n, MPI_BYTE, all, n, MPI_BYTE, impl_->comm, req);
      });
}

void MpiCommunicator::reduce_scatter(const torch::Tensor& input, torch::Tensor& output,
                                     ReduceOp op) {
  check_comm_chunks(input, output, size_, "reduce_scatter", /*reducible=*/true);
  const int n = checked_count(output.numel(), rank_, "reduce_scatter");
  MPI_Datatype type = MPI_FLOAT;
  MPI_Op mpi_op = MPI_SUM;
  if (input.scalar_type() != torch::kFloat32) {
    type = MPI_UINT16_T;
    mpi_op = input.scalar_type() == torch::kFloat16 ? impl_->op_half : impl_->op_bfloat16;
  }
  const void* in = input.data_ptr();
  void* out = output.data_ptr();
  impl_->collective(
      rank_, "reduce_scatter", timeout_,
      [&] { return MPI_Reduce_scatter_block(in, out, n, type, mpi_op, impl_->comm); },
      [&](MPI_Request* req) {
        return MPI_Ireduce_scatter_block(in, out, n, type, mpi_op, impl_->comm, req);
      });
  if (op == ReduceOp::kAverage) output.div_(size_);
}

void MpiCommunicator::barrier() {
  impl_->collective(
      rank_, "barrier", timeout_, [&] { return MPI_Barrier(impl_->comm); },
      [&](MPI_Request* req) { return MPI_Ibarrier(impl_->comm, req); });
}

namespace {

/// A pending MPI_Isend/MPI_Irecv, polled against the communicator's timeout.
class MpiRequest : public Request {
 public:
  MpiRequest(MpiCommunicator::Impl& impl, MPI_Request req, int rank, const char* op,
             std::chrono::milliseconds timeout)
      : impl_(impl), req_(req), rank_(rank), op_(op), timeout_(timeout) {}
  void wait() override;

 private:
  MpiCommunicator::Impl& impl_;
  MPI_Request req_;
  int rank_;
  const char* op_;
  std::chrono::milliseconds timeout_;
};

void MpiRequest::wait() {
  if (req_ == MPI_REQUEST_NULL) return;
  impl_.wait(req_, rank_, op_, timeout_);
  req_ = MPI_REQUEST_NULL;
}

}  // namespace

bool MpiCommunicator::concurrent_point_to_point() const {
  return impl_->watchdog != nullptr;  // granted MPI_THREAD_MULTIPLE
}

std::unique_ptr<Request> MpiCommunicator::isend(const torch::Tensor& tensor, int dst,
                                                uint32_t tag) {
  check_comm_tensor(tensor, "send", /*reducible=*/false);
  check_tag(tag, "send");
  const int n = checked_count(tensor.numel() * tensor.element_size(), rank_, "send");
  MPI_Request req;
  check_mpi(
      MPI_Isend(tensor.data_ptr(), n, MPI_BYTE, dst, static_cast<int>(tag), impl_->comm, &req),
      rank_, "send");
  return std::make_unique<MpiRequest>(*impl_, req, rank_, "send", timeout_);
}

std::unique_ptr<Request> MpiCommunicator::irecv(torch::Tensor& tensor, int src, uint32_t tag) {
  check_comm_tensor(tensor, "recv", /*reducible=*/false);
  check_tag(tag, "recv");
  const int n = checked_count(tensor.numel() * tensor.element_size(), rank_, "recv");
  MPI_Request req;
  check_mpi(
      MPI_Irecv(tensor.data_ptr(), n, MPI_BYTE, src, static_cast<int>(tag), impl_->comm, &req),
      rank_, "recv");
  return std::make_unique<MpiRequest>(*impl_, req, rank_, "recv", timeout_);
}

std::unique_ptr<Communicator> MpiCommunicator::split(int color, int key) {
  // plan_split's allgather has a timeout; MPI_Comm_split has none, but after
  // it every rank is known to be alive and inside this split.
  const SplitPlan plan = plan_split(color, key);
  auto impl = std::make_unique<Impl>();
  impl->watchdog = impl_->watchdog;
  check_mpi(MPI_Comm_split(impl_->comm, color < 0 ? MPI_UNDEFINED : color, key, &impl->comm), rank_,
            "comm_split");
  if (plan.group_rank < 0) return nullptr;
  return std::unique_ptr<Communicator>(new MpiCommunicator(std::move(impl), timeout_));
}

}  // namespace dlscale::comm
