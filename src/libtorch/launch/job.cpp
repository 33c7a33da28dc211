#include "libtorch/launch/job.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>

#include "cluster/cluster.h"
#include "libtorch/comm/session.h"
#include "libtorch/compute/devices.h"
#include "libtorch/compute/threads.h"
#include "libtorch/compute/torch_compat.h"
#include "core/error.h"
#include "core/log.h"
#include "launch/cluster_launcher.h"

namespace dlscale::launch {
namespace {

int (*g_worker_entry)(int, char**) = nullptr;

/// The entry local workers and a cluster's node launchers run as forks of
/// this launcher, or null to exec them (set_worker_entry says when).
int (*fork_entry(const JobOptions& options))(int, char**) {
  const char* exec = std::getenv(kEnvWorkerExec);
  const bool forced = exec != nullptr && std::string(exec) == "1";
  if (forced || options.device != "cpu" || options.launch.backend == "mpi") return nullptr;
  return g_worker_entry;
}

std::string this_host_name() {
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  return host;
}

/// --backend as given; else mpi under mpirun, nccl when every local rank has
/// a GPU of its own in a build with NCCL, gloo otherwise.
std::string job_backend(const JobOptions& options, const LaunchEnv& env, int cuda_device) {
  if (!options.launch.backend.empty()) {
    comm::check_backend(options.launch.backend);
    return options.launch.backend;
  }
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
  // Debian's Open MPI starts under srun through PMIx only (docs/slurm.md).
  DLSCALE_CHECK(env.kind != LaunchKind::kSrun || so.backend != "mpi" || env.slurm.pmix,
                "--backend mpi under srun needs 'srun --mpi=pmix' (this task has no PMIx server: "
                "PMIX_RANK is not set); or use --backend gloo");
  so.rank = env.rank;
  so.size = env.world_size;
  so.timeout = options.timeout();
  so.mpi_polled = options.launch.mpi_collectives == MpiCollectives::kPolled;
  // dlscale's own launcher tells its workers where to meet; under mpirun or
  // srun the command line wins over the environment.
  const bool flags_win = env.kind != LaunchKind::kSpawned;
  const LaunchOptions& l = options.launch;
  so.store_addr = (flags_win && l.master_addr_given) || env.master_addr.empty() ? l.master_addr : env.master_addr;
  so.store_port = (flags_win && l.master_port_given) || env.master_port <= 0 ? l.master_port : env.master_port;
  // Under mpirun/srun nobody else hosts the rendezvous store.
  so.host_store = env.kind != LaunchKind::kSpawned && env.rank == 0;
  const bool multi_node = env.world_size > env.local_world_size;
  so.store_bind_addr = options.launch.master_bind.empty() ? so.store_addr : options.launch.master_bind;
  so.store_secret = env.job_secret;
  if (so.host_store && so.store_secret.empty()) {
    DLSCALE_LOG_WARN("the rendezvous store at {}:{} admits any client: set DLSCALE_JOB_SECRET to "
                     "the same value for every rank (docs/launch.md)",
                     so.store_bind_addr, so.store_port);
  }
  // Across nodes, peers must reach this rank at the address they used for
  // the master's store; on one node loopback is enough.
  if (multi_node)
    so.gloo_hostname = !options.launch.host_addr.empty() ? options.launch.host_addr : this_host_name();
  return so;
}

void run_worker(const JobOptions& options, const LaunchEnv& env, const WorkerBody& body) {
  log_set_rank(env.rank, env.world_size);
  WorkerSlot slot;
  slot.env = &env;
  slot.status = StatusWriter(env.status_fd);
  slot.prints = env.rank == options.servers || options.launch.verbose_ranks;  // the first worker
  // Spawned workers of one launcher form a node even when several launchers
  // share a host (a multi-node job tried on one machine).
  // Under srun, the Slurm node.
  slot.node_name = env.kind == LaunchKind::kSpawned ? fmt::format("node{}", env.rank / env.local_world_size)
                   : !env.node_name.empty()         ? env.node_name
                                                    : this_host_name();
  slot.status.write("rendezvous");
  comm::CommSession session(session_options(options, env));
  slot.comm = &session.world();
  if (env.rank == 0) {
    DLSCALE_LOG_INFO("{} workers connected via {} ({})", env.world_size, slot.comm->backend(),
                     env.launcher);
  }
  try {
    body(slot);
  } catch (...) {
    session.abandon();
    throw;
  }
}

void run_launcher(const JobOptions& options, const std::vector<std::string>& argv) {
  DLSCALE_CHECK(options.launch.nnodes == 1 || options.launch.master_port > 0,
                "multi-node jobs need --master-port");
  LaunchPlan plan;
  plan.binary = self_executable();
  plan.run = fork_entry(options);
  plan.argv = argv;
  plan.workers = options.launch.workers;
  plan.servers = options.servers;
  plan.nnodes = options.launch.nnodes;
  plan.node_rank = options.launch.node_rank;
  plan.master_addr = options.launch.master_addr;
  plan.master_bind = options.launch.master_bind;
  plan.master_port = options.launch.nnodes > 1 ? options.launch.master_port : 0;
  plan.threads_per_worker = options.threads_per_worker;
  plan.bind_cores = options.launch.bind_cores;
  plan.verbose_ranks = options.launch.verbose_ranks;
  plan.timeout = options.timeout();
  try {
    run_local_workers(plan);
  } catch (const JobFailed& e) {
    if (std::getenv(kEnvCluster) != nullptr) {
      std::fprintf(stderr, "%s%s\n", kCauseLinePrefix, enum_names(e.cause()).name(e.cause()).c_str());
    }
    throw;
  }
}

void run_on_cluster(const JobOptions& options, const std::vector<std::string>& argv) {
  ClusterPlan plan;
  plan.cluster = options.launch.cluster;
  plan.workers_per_host = options.launch.workers_per_host;
  plan.servers = options.servers;
  plan.master_port = options.launch.master_port;
  plan.run = fork_entry(options);
  plan.argv = argv;
  run_cluster_job(plan);
}

}  // namespace

void set_worker_entry(int (*entry)(int argc, char** argv)) { g_worker_entry = entry; }

void prepare_launcher(const LaunchEnv& env) {
  if (!env.is_worker()) set_compute_threads(1);
}

void run_job(const JobOptions& options, const LaunchEnv& env, const std::vector<std::string>& argv,
             const WorkerBody& body) {
  DLSCALE_CHECK(options.launch.cluster.empty() || env.kind == LaunchKind::kStandalone ||
                    env.kind == LaunchKind::kSpawned,
                "--cluster starts the job on the cluster's hosts itself: run it by hand, not "
                "under {}",
                env.launcher);
  if (env.is_worker() && env.world_size > 1) {
    run_worker(options, env, body);
  } else if (!options.launch.cluster.empty() && env.cluster.name.empty()) {
    run_on_cluster(options, argv);
  } else if (!env.is_worker() && (options.launch.workers + options.servers > 1 || options.launch.nnodes > 1)) {
    run_launcher(options, argv);
  } else {
    WorkerSlot slot;
    slot.env = &env;
    slot.node_name = this_host_name();
    body(slot);
  }
}

}  // namespace dlscale::launch
