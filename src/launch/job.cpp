#include "launch/job.h"

#include <unistd.h>

#include <memory>

#include "comm/session.h"
#include "core/error.h"
#include "core/log.h"
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

std::string this_host_name() {
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  return host;
}

comm::SessionOptions session_options(const JobOptions& options, const LaunchEnv& env) {
  comm::SessionOptions so;
  so.backend = !options.backend.empty() ? options.backend
                                        : (env.kind == LaunchKind::kMpirun ? "mpi" : "gloo");
  so.rank = env.rank;
  so.size = env.world_size;
  so.timeout = options.timeout;
  so.mpi_polled = options.mpi_collectives == "polled";
  so.store_addr = env.master_addr.empty() ? options.master_addr : env.master_addr;
  so.store_port = env.master_port > 0 ? env.master_port : options.master_port;
  // Under mpirun/srun nobody else hosts the rendezvous store.
  so.host_store = env.kind != LaunchKind::kSpawned && env.rank == 0;
  const bool multi_node = env.world_size > env.local_world_size;
  so.store_bind_addr = multi_node ? "0.0.0.0" : so.store_addr;
  // Across nodes, peers must reach this rank at the address they used for
  // the master's store; on one node loopback is enough.
  if (multi_node)
    so.gloo_hostname = !options.host_addr.empty() ? options.host_addr : this_host_name();
  return so;
}

void run_worker(const JobOptions& options, const LaunchEnv& env, const WorkerBody& body) {
  log_set_rank(env.rank, env.world_size);
  WorkerSlot slot;
  slot.env = &env;
  slot.status = StatusWriter(env.status_fd);
  slot.prints = env.rank == 0 || options.verbose_ranks;
  // Spawned workers of one launcher form a node even when several launchers
  // share a host (a multi-node job tried on one machine).
  slot.node_name = env.kind == LaunchKind::kSpawned
                       ? fmt::format("node{}", env.rank / env.local_world_size)
                       : this_host_name();
  slot.status.write("rendezvous");
  comm::CommSession session(session_options(options, env));
  slot.comm = &session.world();
  if (env.rank == 0) {
    DLSCALE_LOG_INFO("{} workers connected via {} ({})", env.world_size, slot.comm->backend(),
                     to_string(env.kind));
  }
  try {
    body(slot);
  } catch (...) {
    session.abandon();
    throw;
  }
}

void run_launcher(const JobOptions& options, const std::vector<std::string>& argv) {
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
  plan.threads_per_worker = options.threads_per_worker;
  plan.bind_cores = options.bind_cores;
  plan.verbose_ranks = options.verbose_ranks;
  plan.timeout = options.timeout;
  run_local_workers(plan);
}

}  // namespace

void run_job(const JobOptions& options, const LaunchEnv& env, const std::vector<std::string>& argv,
             const WorkerBody& body) {
  if (env.is_worker() && env.world_size > 1) {
    run_worker(options, env, body);
  } else if (!env.is_worker() && (options.workers > 1 || options.nnodes > 1)) {
    run_launcher(options, argv);
  } else {
    WorkerSlot slot;
    slot.env = &env;
    slot.node_name = this_host_name();
    body(slot);
  }
}

void run_train(const train::TrainOptions& options, const LaunchEnv& env,
               const std::vector<std::string>& argv, std::ostream& out) {
  // Validate once here, so bad input is one error, not one per worker.
  const train::ResolvedTrainOptions resolved = train::resolve_train_options(options);
  run_job(train::job_options(resolved.options), env, argv, [&](WorkerSlot& slot) {
    train::WorkerContext ctx;
    ctx.rank = slot.env->rank;
    ctx.world_size = slot.comm != nullptr ? slot.env->world_size : 1;
    ctx.local_rank = slot.env->local_rank;
    ctx.local_world_size = slot.comm != nullptr ? slot.env->local_world_size : 1;
    ctx.comm = slot.comm;
    ctx.node_name = slot.node_name;
    slot.status.write("building model");
    train::Trainer trainer(options, ctx, argv);
    train::ConsoleObserver console(out);
    WorkerObserver observer(slot.prints ? &console : nullptr, slot.status);
    trainer.run(observer);
  });
}

}  // namespace dlscale::launch
