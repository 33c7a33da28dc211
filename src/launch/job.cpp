#include "launch/job.h"

#include <unistd.h>

#include <memory>

#include "cluster/cluster.h"
#include "comm/session.h"
#include "core/devices.h"
#include "core/error.h"
#include "core/log.h"
#include "core/torch_compat.h"
#include "launch/cluster_launcher.h"
#include "train/ps_server.h"
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
  void on_eval(const train::EvalRecord& e, const train::TrainResult& r) override {
    if (console_) console_->on_eval(e, r);
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

/// --backend as given; else mpi under mpirun, nccl when every local rank has
/// a GPU of its own in a build with NCCL, gloo otherwise.
std::string job_backend(const JobOptions& options, const LaunchEnv& env, int cuda_device) {
  if (!options.backend.empty()) return options.backend;
  if (env.kind == LaunchKind::kMpirun) return "mpi";
  const bool gpu_per_rank = cuda_device >= 0 && env.local_world_size <= compat::cuda_device_count();
  return gpu_per_rank && comm::backend_built("nccl") ? "nccl" : "gloo";
}

comm::SessionOptions session_options(const JobOptions& options, const LaunchEnv& env) {
  comm::SessionOptions so;
  const torch::Device device =
      worker_device(options.device, env.local_rank, env.local_world_size, options.share_gpus);
  so.cuda_device = device.is_cuda() ? device.index() : -1;
  so.backend = job_backend(options, env, so.cuda_device);
  so.rank = env.rank;
  so.size = env.world_size;
  so.timeout = options.timeout;
  so.mpi_polled = options.mpi_collectives == "polled";
  so.store_addr = env.master_addr.empty() ? options.master_addr : env.master_addr;
  so.store_port = env.master_port > 0 ? env.master_port : options.master_port;
  // Under mpirun/srun nobody else hosts the rendezvous store.
  so.host_store = env.kind != LaunchKind::kSpawned && env.rank == 0;
  const bool multi_node = env.world_size > env.local_world_size;
  so.store_bind_addr = options.master_bind.empty() ? so.store_addr : options.master_bind;
  so.store_secret = env.job_secret;
  if (so.host_store && so.store_secret.empty()) {
    DLSCALE_LOG_WARN("the rendezvous store at {}:{} admits any client: set DLSCALE_JOB_SECRET to "
                     "the same value for every rank (docs/launch.md)",
                     so.store_bind_addr, so.store_port);
  }
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
  slot.prints = env.rank == options.servers || options.verbose_ranks;  // the first worker
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
  plan.servers = options.servers;
  plan.nnodes = options.nnodes;
  plan.node_rank = options.node_rank;
  plan.master_addr = options.master_addr;
  plan.master_bind = options.master_bind;
  plan.master_port = options.nnodes > 1 ? options.master_port : 0;
  plan.threads_per_worker = options.threads_per_worker;
  plan.bind_cores = options.bind_cores;
  plan.verbose_ranks = options.verbose_ranks;
  plan.timeout = options.timeout;
  run_local_workers(plan);
}

void run_on_cluster(const JobOptions& options, const std::vector<std::string>& argv) {
  ClusterPlan plan;
  plan.cluster = options.cluster;
  plan.workers_per_host = options.workers_per_host;
  plan.servers = options.servers;
  plan.master_port = options.master_port;
  plan.argv = argv;
  run_cluster_job(plan);
}

}  // namespace

void run_job(const JobOptions& options, const LaunchEnv& env, const std::vector<std::string>& argv,
             const WorkerBody& body) {
  DLSCALE_CHECK(options.cluster.empty() || env.kind == LaunchKind::kStandalone ||
                    env.kind == LaunchKind::kSpawned,
                "--cluster starts the job on the cluster's hosts itself: run it by hand, not "
                "under {}",
                to_string(env.kind));
  if (env.is_worker() && env.world_size > 1) {
    run_worker(options, env, body);
  } else if (!options.cluster.empty() && env.cluster.name.empty()) {
    run_on_cluster(options, argv);
  } else if (!env.is_worker() && (options.workers + options.servers > 1 || options.nnodes > 1)) {
    run_launcher(options, argv);
  } else {
    WorkerSlot slot;
    slot.env = &env;
    slot.node_name = this_host_name();
    body(slot);
  }
}

namespace {

train::WorkerContext worker_context(const WorkerSlot& slot) {
  train::WorkerContext ctx;
  ctx.rank = slot.env->rank;
  ctx.world_size = slot.comm != nullptr ? slot.env->world_size : 1;
  ctx.local_rank = slot.env->local_rank;
  ctx.local_world_size = slot.comm != nullptr ? slot.env->local_world_size : 1;
  ctx.comm = slot.comm;
  ctx.node_name = slot.node_name;
  return ctx;
}

void train_worker(const train::TrainOptions& options, const train::WorkerContext& ctx,
                  WorkerSlot& slot, const std::vector<std::string>& argv, std::ostream& out) {
  slot.status.write("building model");
  train::Trainer trainer(options, ctx, argv);
  train::ConsoleObserver console(out);
  WorkerObserver observer(slot.prints ? &console : nullptr, slot.status);
  trainer.run(observer);
}

/// --strategy ps: the job's processes become shards and workers
/// (docs/strategies.md, "Parameter server").
void ps_job(const train::TrainOptions& options, const dp::PsOptions& ps, WorkerSlot& slot,
            const std::vector<std::string>& argv, std::ostream& out) {
  DLSCALE_CHECK(slot.comm == nullptr || slot.comm->concurrent_point_to_point(),
                "--strategy ps serves each worker from its own thread and needs "
                "MPI_THREAD_MULTIPLE: use --mpi-collectives blocking (the default) with an MPI "
                "library that provides it, or --backend gloo");
  train::WorkerContext ctx = worker_context(slot);
  dp::PsLayout layout;
  std::unique_ptr<comm::Communicator> owned;
  for (int s = 0; s < ps.shards; ++s) layout.shard_ranks.push_back(s);
  if (ps.placement == dp::PsPlacement::kDedicated) {
    // The first K ranks serve; the others train on a communicator of their own.
    comm::Communicator& world = *slot.comm;
    const bool server = world.rank() < ps.shards;
    owned = world.split(server ? -1 : 0, world.rank());
    layout.comm = &world;
    for (int r = ps.shards; r < world.size(); ++r) layout.worker_ranks.push_back(r);
    if (server) {
      slot.status.write(fmt::format("ps shard {} serving", world.rank()));
      train::run_ps_server(options, layout, world.rank(), [&](const std::string& status) {
        slot.status.write(status);
      });
      return;
    }
    ctx.rank = world.rank() - ps.shards;
    ctx.world_size = world.size() - ps.shards;
    ctx.comm = owned.get();
  } else if (slot.comm != nullptr) {
    // Shard threads and workers share a duplicate of the world, point to point only.
    owned = slot.comm->split(0, slot.comm->rank());
    layout.comm = owned.get();
    for (int r = 0; r < owned->size(); ++r) layout.worker_ranks.push_back(r);
    layout.local_shard = owned->rank() < ps.shards ? owned->rank() : -1;
  } else {
    layout.local_shard = 0;  // one process: the worker and its shard
  }
  ctx.ps = &layout;
  train_worker(options, ctx, slot, argv, out);
}

}  // namespace

void run_train(const train::TrainOptions& options, const LaunchEnv& env,
               const std::vector<std::string>& argv, std::ostream& out) {
  // Validate once here, so bad input is one error, not one per worker.
  const launch::JobOptions job = train::job_options(options);
  int workers = env.is_worker() ? env.world_size - job.servers : 0;
  int local_workers = 0;
  // The cluster launcher checks the job it will start on every host.
  if (!options.cluster.empty() && env.cluster.name.empty()) {
    if (const auto spec = cluster::find_cluster(options.cluster)) {
      workers = spec->hosts * options.workers_per_host;
      local_workers = options.workers_per_host;
    }
  }
  DLSCALE_CHECK(!env.is_worker() || workers >= 1,
                "--ps-shards {} dedicated server(s) leave no worker among the job's {} ranks; "
                "start more ranks or use fewer shards",
                job.servers, env.world_size);
  train::TrainOptions with_cluster = options;
  with_cluster.cluster_hosts = env.cluster.hosts;  // for the record
  with_cluster.cluster_link_mbit = env.cluster.link_mbit;
  const train::ResolvedTrainOptions resolved =
      train::resolve_train_options(with_cluster, workers, local_workers);
  if (resolved.sync.strategy == dp::Strategy::kPs && !env.is_worker()) {
    train::plan_ps_variables(resolved);  // more shards than variables: one error, now
  }
  run_job(train::job_options(resolved.options), env, argv, [&](WorkerSlot& slot) {
    if (resolved.sync.strategy == dp::Strategy::kPs) {
      ps_job(with_cluster, resolved.sync.ps, slot, argv, out);
    } else {
      train_worker(with_cluster, worker_context(slot), slot, argv, out);
    }
  });
}

}  // namespace dlscale::launch
