#include "libtorch/comm/session.h"

#include "libtorch/comm/gloo/gloo_communicator.h"
#include "libtorch/comm/staged_communicator.h"
#if DLSCALE_WITH_MPI
#include "libtorch/comm/mpi/mpi_communicator.h"
#endif
#if DLSCALE_WITH_NCCL
#include "libtorch/comm/nccl/nccl_communicator.h"
#endif
#include <chrono>
#include <csignal>
#include <deque>
#include <thread>

#include "comm/tcp_store.h"
#include "core/error.h"

namespace dlscale::comm {

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

BackendWorld make_gloo(const SessionOptions& o, TcpStore* store) {
  GlooOptions go;
  go.timeout = o.timeout;
  go.hostname = o.gloo_hostname;
  return {std::make_unique<GlooCommunicator>(*store, o.rank, o.size, go), nullptr, nullptr};
}

#if DLSCALE_WITH_MPI
BackendWorld make_mpi(const SessionOptions& o, TcpStore* /*store*/) {
  auto mpi = std::make_shared<MpiRuntime>(o.mpi_polled ? MpiCollectives::kPolled
                                                       : MpiCollectives::kBlocking);
  DLSCALE_CHECK(mpi->size() == o.size,
                "MPI reports {} ranks but the launch environment says {}; run the mpi backend "
                "under mpirun or srun --mpi",
                mpi->size(), o.size);
  MpiRuntime* runtime = mpi.get();  // the session keeps it past its communicator
  return {std::make_unique<MpiCommunicator>(*mpi, o.timeout), mpi,
          [runtime] { runtime->abandon(); }};
}
#endif

#if DLSCALE_WITH_NCCL
BackendWorld make_nccl(const SessionOptions& o, TcpStore* store) {
  DLSCALE_CHECK(o.cuda_device >= 0, "backend 'nccl' needs --device cuda");
  NcclOptions no;
  no.device = o.cuda_device;
  no.timeout = o.timeout;
  return {std::make_unique<NcclCommunicator>(*store, o.rank, o.size, no), nullptr, nullptr};
}
#endif

/// A backend's factory, by its word, and whether it meets through the store.
struct Factory {
  std::string name;
  bool uses_store = true;
  BackendFactory make;
};

/// The backends this build has (the words, and which are built:
/// comm/backend.cpp).
std::deque<Factory>& factory_table() {
  static std::deque<Factory> factories = [] {
    std::deque<Factory> t{{"gloo", true, make_gloo}};
#if DLSCALE_WITH_MPI
    t.push_back({"mpi", false, make_mpi});
#endif
#if DLSCALE_WITH_NCCL
    t.push_back({"nccl", true, make_nccl});
#endif
    return t;
  }();
  return factories;
}

const Factory& factory_of(const std::string& backend) {
  check_backend(backend);
  for (const Factory& f : factory_table()) {
    if (f.name == backend) return f;
  }
  throw InternalError(fmt::format("--backend {} is named as built but has no factory", backend));
}

}  // namespace

void register_backend(BackendEntry entry) {
  DLSCALE_CHECK(entry.make != nullptr, "backend '{}' needs a factory", entry.name.name);
  const std::string name = entry.name.name;
  add_backend_name(std::move(entry.name));
  factory_table().push_back({name, entry.uses_store, std::move(entry.make)});
}

CommSession::CommSession(const SessionOptions& o) {
  // Gloo writes to its sockets without MSG_NOSIGNAL: a write to a peer that
  // died would kill this rank with SIGPIPE before it could say why, and the
  // launchers would then name it rather than the rank that died (a drill
  // saw it). Ignored, the write fails with EPIPE and the collective throws
  // a PeerFailure naming the peer. The process's own pipes (status, stdout)
  // then fail the same way, which only a dying launcher causes.
  std::signal(SIGPIPE, SIG_IGN);
  const Factory& backend = factory_of(o.backend);
  if (backend.uses_store) {
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
  BackendWorld made = backend.make(o, store_.get());
  DLSCALE_ASSERT(made.world != nullptr);
  runtime_ = std::move(made.runtime);
  abandon_ = std::move(made.abandon);
  world_ = std::make_unique<StagedCommunicator>(std::move(made.world));
}

CommSession::~CommSession() {
  world_.reset();  // before the store or the runtime it depends on
}

void CommSession::abandon() {
  if (abandon_) abandon_();
}

}  // namespace dlscale::comm
