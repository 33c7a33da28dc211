#include "comm/session.h"

#include "comm/gloo/gloo_communicator.h"
#include "comm/mpi/mpi_communicator.h"
#include "comm/tcp_store.h"
#include "core/error.h"

namespace dlscale::comm {

CommSession::CommSession(const SessionOptions& o) {
  if (o.backend == "mpi") {
    mpi_ = std::make_unique<MpiRuntime>(o.mpi_polled ? MpiCollectives::kPolled
                                                     : MpiCollectives::kBlocking);
    DLSCALE_CHECK(mpi_->size() == o.size,
                  "MPI reports {} ranks but the launch environment says {}; run the mpi backend "
                  "under mpirun or srun --mpi",
                  mpi_->size(), o.size);
    world_ = std::make_unique<MpiCommunicator>(*mpi_, o.timeout);
  } else if (o.backend == "gloo") {
    if (o.host_store) {
      store_server_ =
          std::make_unique<TcpStoreServer>(o.store_bind_addr, static_cast<uint16_t>(o.store_port),
                                           o.store_secret);
    }
    store_ = std::make_unique<TcpStore>(o.store_addr, static_cast<uint16_t>(o.store_port),
                                        o.timeout, o.store_secret);
    GlooOptions go;
    go.timeout = o.timeout;
    go.hostname = o.gloo_hostname;
    world_ = std::make_unique<GlooCommunicator>(*store_, o.rank, o.size, go);
  } else if (o.backend == "nccl") {
    throw Error(
        "backend 'nccl' is not available in this build (it needs a CUDA build; see "
        "docs/launch.md); allowed: " +
        std::string(kBackendNames));
  } else {
    throw Error(fmt::format("unknown backend '{}'; allowed: {}", o.backend, kBackendNames));
  }
}

CommSession::~CommSession() {
  world_.reset();  // before the store or MPI it depends on
}

void CommSession::abandon() {
  if (mpi_) mpi_->abandon();
}

}  // namespace dlscale::comm
