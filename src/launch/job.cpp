#include "launch/job.h"

#include <unistd.h>

#include <memory>

#include "comm/gloo/gloo_communicator.h"
#include "comm/mpi/mpi_communicator.h"
#include "comm/tcp_store.h"
#include "core/error.h"
#include "core/log.h"
#include "launch/local_launcher.h"
#include "train/trainer.h"

namespace dlscale::launch {
namespace {

/// Forwards to the console (rank 0) and reports progress to the launcher.
class WorkerObserver : public train::TrainObserver {
 public:
  WorkerObserver(train::TrainObserver* console, StatusWriter status)
      : console_(console), status_(status) {}
  void on_start(const train::TrainResult& r) override {
    status_.write("starting steps");
    if (console_) console_->on_start(r);
  }
  void on_phase(int64_t step, const char* phase) override {
    status_.write(fmt::format("step {} {}", step + 1, phase));
  }
  void on_step(const train::StepRecord& s, const train::TrainResult& r) override {
    if (console_) console_->on_step(s, r);
  }
  void on_finish(const train::TrainResult& r) override {
    status_.write("finishing");
    if (console_) console_->on_finish(r);
  }

 private:
  train::TrainObserver* console_;
  StatusWriter status_;
};

void run_worker(const train::TrainOptions& options, const LaunchEnv& env,
                const std::vector<std::string>& argv, std::ostream& out) {
  log_set_rank(env.rank, env.world_size);
  const StatusWriter status(env.status_fd);
  const std::string backend =
      !options.backend.empty() ? options.backend : (env.kind == LaunchKind::kMpirun ? "mpi" : "gloo");
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(options.timeout_s * 1000));

  std::unique_ptr<comm::MpiRuntime> mpi;
  std::unique_ptr<comm::TcpStoreServer> store_server;
  std::unique_ptr<comm::TcpStore> store;
  std::unique_ptr<comm::Communicator> comm;
  status.write("rendezvous");
  if (backend == "mpi") {
    mpi = std::make_unique<comm::MpiRuntime>();
    DLSCALE_CHECK(mpi->size() == env.world_size,
                  "MPI reports {} ranks but the launch environment ({}) says {}; run the mpi "
                  "backend under mpirun or srun --mpi",
                  mpi->size(), to_string(env.kind), env.world_size);
    comm = std::make_unique<comm::MpiCommunicator>(*mpi, timeout);
  } else {
    std::string addr = env.master_addr.empty() ? options.master_addr : env.master_addr;
    int port = env.master_port > 0 ? env.master_port : options.master_port;
    if (env.kind != LaunchKind::kSpawned && env.rank == 0) {
      // Under mpirun/srun nobody else hosts the rendezvous store.
      store_server = std::make_unique<comm::TcpStoreServer>(
          env.world_size > env.local_world_size ? "0.0.0.0" : addr, static_cast<uint16_t>(port));
    }
    store = std::make_unique<comm::TcpStore>(addr, static_cast<uint16_t>(port), timeout);
    comm::GlooOptions go;
    go.timeout = timeout;
    // Across nodes, peers must reach this rank at the address they used for
    // the master's store; on one node loopback is enough.
    if (env.world_size > env.local_world_size) {
      if (!options.host_addr.empty()) {
        go.hostname = options.host_addr;
      } else {
        char host[256] = {};
        ::gethostname(host, sizeof(host) - 1);
        go.hostname = host;
      }
    }
    comm = std::make_unique<comm::GlooCommunicator>(*store, env.rank, env.world_size, go);
  }
  if (env.rank == 0) {
    DLSCALE_LOG_INFO("{} workers connected via {} ({})", env.world_size, comm->backend(),
                     to_string(env.kind));
  }
  train::WorkerContext ctx;
  ctx.rank = env.rank;
  ctx.world_size = env.world_size;
  ctx.local_rank = env.local_rank;
  ctx.local_world_size = env.local_world_size;
  ctx.comm = comm.get();
  status.write("building model");
  try {
    train::Trainer trainer(options, ctx, argv);
    train::ConsoleObserver console(out);
    const bool prints = env.rank == 0 || options.verbose_ranks;
    WorkerObserver observer(prints ? &console : nullptr, status);
    trainer.run(observer);
  } catch (...) {
    if (mpi) mpi->abandon();
    throw;
  }
}

void run_launcher(const train::TrainOptions& options, const std::vector<std::string>& argv) {
  // Validate once here, so bad input is one error, not one per worker.
  const train::ResolvedTrainOptions resolved = train::resolve_train_options(options);
  DLSCALE_CHECK(options.nnodes == 1 || options.master_port > 0,
                "multi-node jobs need --master-port");
  LaunchPlan plan;
  plan.binary = "/proc/self/exe";
  plan.argv = argv;
  plan.workers = options.workers;
  plan.nnodes = options.nnodes;
  plan.node_rank = options.node_rank;
  plan.master_addr = options.master_addr;
  plan.master_port = options.nnodes > 1 ? options.master_port : 0;
  plan.threads_per_worker = resolved.options.threads;
  plan.bind_cores = options.bind_cores;
  plan.verbose_ranks = options.verbose_ranks;
  plan.timeout = std::chrono::milliseconds(static_cast<int64_t>(options.timeout_s * 1000));
  run_local_workers(plan);
}

}  // namespace

void run_train(const train::TrainOptions& options, const LaunchEnv& env,
               const std::vector<std::string>& argv, std::ostream& out) {
  if (env.is_worker() && env.world_size > 1) {
    run_worker(options, env, argv, out);
  } else if (!env.is_worker() && (options.workers > 1 || options.nnodes > 1)) {
    run_launcher(options, argv);
  } else {
    train::Trainer trainer(options, {}, argv);
    train::ConsoleObserver console(out);
    trainer.run(console);
  }
}

}  // namespace dlscale::launch
