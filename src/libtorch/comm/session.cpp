#include "libtorch/comm/session.h"

#include "libtorch/comm/gloo/gloo_communicator.h"
#include "libtorch/comm/staged_communicator.h"
#if DLSCALE_WITH_MPI
#include "libtorch/comm/mpi/mpi_communicator.h"
#endif
#if DLSCALE_WITH_NCCL
#include "libtorch/comm/nccl/nccl_communicator.h"
#endif
#include "comm/tcp_store.h"
#include "core/error.h"

#include <chrono>
#include <thread>

namespace dlscale::comm {

#if !DLSCALE_WITH_MPI
/// Built without MPI: nothing to initialise or abandon.
class MpiRuntime {
 public:
  void abandon() {}
};
#endif

namespace {

/// Before Gloo's full mesh: every rank checks that it was started for the
/// same world size as the first rank to join, and waits until all have
/// joined. Nodes given different --nnodes/--workers would otherwise meet a
/// raw Gloo error on one side and a full timeout on the other.
void agree_world_size(TcpStore& store, int rank, int size, std::chrono::milliseconds timeout) {
  if (store.add("dlscale/world/claims", 1) == 1) store.set("dlscale/world/size", std::to_string(size));
  const std::string first = store.get("dlscale/world/size");
  if (first != std::to_string(size)) {
    const std::string why = fmt::format(
        "rank {} was started for a job of {} ranks, but the first rank to join for {}: every node "
        "must be given the same --nnodes and --workers",
        rank, size, first);
    store.set("dlscale/world/mismatch", why);
    store.add("dlscale/world/mismatches", 1);
    throw Error(why);
  }
  store.add("dlscale/world/arrived", 1);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (store.add("dlscale/world/mismatches", 0) > 0) throw Error(store.get("dlscale/world/mismatch"));
    const int64_t arrived = store.add("dlscale/world/arrived", 0);
    if (arrived >= size) return;
    if (std::chrono::steady_clock::now() > deadline) {
      throw PeerFailure(fmt::format("rendezvous: only {} of {} ranks joined within {} s", arrived, size,
                                    timeout.count() / 1000.0));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace

CommSession::CommSession(const SessionOptions& o) {
  DLSCALE_CHECK(backend_built(o.backend), "--backend {} is not available in this build; allowed: {}",
                enum_names(o.backend).name(o.backend), backend_names());
  std::unique_ptr<Communicator> world;
#if DLSCALE_WITH_MPI
  if (o.backend == Backend::kMpi) {
    mpi_ = std::make_unique<MpiRuntime>(o.mpi_polled ? MpiCollectives::kPolled
                                                     : MpiCollectives::kBlocking);
    DLSCALE_CHECK(mpi_->size() == o.size,
                  "MPI reports {} ranks but the launch environment says {}; run the mpi backend "
                  "under mpirun or srun --mpi",
                  mpi_->size(), o.size);
    world = std::make_unique<MpiCommunicator>(*mpi_, o.timeout);
  }
#endif
  if (o.backend == Backend::kGloo || o.backend == Backend::kNccl) {
    if (o.host_store) {
      store_server_ =
          std::make_unique<TcpStoreServer>(o.store_bind_addr, static_cast<uint16_t>(o.store_port),
                                           o.store_secret);
    }
    // A served store on port 0 listens on a free port: connect to that one.
    const uint16_t port = store_server_ ? store_server_->port() : static_cast<uint16_t>(o.store_port);
    store_ = std::make_unique<TcpStore>(o.store_addr, port, o.timeout, o.store_secret);
    agree_world_size(*store_, o.rank, o.size, o.timeout);
  }
  if (o.backend == Backend::kGloo) {
    GlooOptions go;
    go.timeout = o.timeout;
    go.hostname = o.gloo_hostname;
    world = std::make_unique<GlooCommunicator>(*store_, o.rank, o.size, go);
  }
#if DLSCALE_WITH_NCCL
  if (o.backend == Backend::kNccl) {
    DLSCALE_CHECK(o.cuda_device >= 0, "backend 'nccl' needs --device cuda");
    NcclOptions no;
    no.device = o.cuda_device;
    no.timeout = o.timeout;
    world = std::make_unique<NcclCommunicator>(*store_, o.rank, o.size, no);
  }
#endif
  DLSCALE_ASSERT(world != nullptr);
  world_ = std::make_unique<StagedCommunicator>(std::move(world));
}

CommSession::~CommSession() {
  world_.reset();  // before the store or MPI it depends on
}

void CommSession::abandon() {
  if (mpi_) mpi_->abandon();
}

}  // namespace dlscale::comm
