#include "cli/launch_flags.h"

namespace dlscale::cli {

void add_launch_flags(CLI::App* cmd, LaunchFlags& flags, const std::string& group) {
  cmd->add_option("--workers,-n", flags.workers,
                  "Worker processes to spawn on this node (each works on its shard)")
      ->capture_default_str()
      ->group(group);
  cmd->add_option("--mpi-collectives", flags.mpi_collectives,
                  "MPI backend: blocking (MPI's blocking collectives under a deadline watchdog "
                  "that aborts the job at --timeout; needs MPI_THREAD_MULTIPLE, else polled) | "
                  "polled (non-blocking collectives polled against --timeout; slower)")
      ->capture_default_str()
      ->group(group);
  cmd->add_option("--backend", flags.backend,
                  "gloo | mpi | nccl (CUDA builds); default: mpi under mpirun, nccl with --device "
                  "cuda and a GPU per worker, gloo otherwise (docs/gpu.md)")
      ->group(group);
  cmd->add_flag("--share-gpus", flags.share_gpus,
                "--device cuda: let several local workers use one GPU when there are fewer GPUs "
                "than workers (Gloo stages through host memory; NCCL cannot)")
      ->group(group);
  cmd->add_option("--timeout", flags.timeout_s,
                  "Seconds after which a silent worker or a stuck collective fails the job")
      ->capture_default_str()
      ->group(group);
  cmd->add_flag("--bind-cores", flags.bind_cores,
                "Pin each local worker to its own --threads cores")
      ->group(group);
  cmd->add_flag("--verbose-ranks", flags.verbose_ranks,
                "Let every rank print its report (default: rank 0 only)")
      ->group(group);
  cmd->add_option("--nnodes", flags.nnodes, "Nodes in the job (run dlscale on each)")
      ->capture_default_str()
      ->group(group);
  cmd->add_option("--node-rank", flags.node_rank, "This node's index, 0 .. nnodes-1")
      ->capture_default_str()
      ->group(group);
  cmd->add_option("--master-addr", flags.master_addr,
                  "Address of node 0, which hosts the rendezvous store")
      ->capture_default_str()
      ->group(group);
  cmd->add_option("--master-bind", flags.master_bind,
                  "Address the rendezvous store listens on (node 0, or rank 0 under mpirun/srun); "
                  "default: --master-addr; 0.0.0.0 = every interface. Every process of a job "
                  "presents DLSCALE_JOB_SECRET to it (docs/launch.md)")
      ->group(group);
  cmd->add_option("--host-addr", flags.host_addr,
                  "Address at which the other nodes reach this node's workers (multi-node Gloo); "
                  "default: the address of this host's name")
      ->group(group);
  cmd->add_option("--cluster", flags.cluster,
                  "Run on the emulated cluster of this name (dlscale cluster up; needs root): "
                  "--workers-per-host workers in each of its hosts, across its shaped links "
                  "(docs/cluster.md)")
      ->group(group);
  cmd->add_option("--workers-per-host", flags.workers_per_host,
                  "--cluster: worker processes in each host")
      ->capture_default_str()
      ->group(group);
  cmd->add_option("--master-port", flags.master_port,
                  "Port of the rendezvous store (multi-node, mpirun/srun with gloo)")
      ->capture_default_str()
      ->group(group);
}

void LaunchFlags::copy_into(train::TrainOptions& o) const {
  o.workers = workers;
  o.nnodes = nnodes;
  o.node_rank = node_rank;
  o.master_addr = master_addr;
  o.master_port = master_port;
  o.master_bind = master_bind;
  o.host_addr = host_addr;
  o.backend = backend;
  o.share_gpus = share_gpus;
  o.mpi_collectives = mpi_collectives;
  o.cluster = cluster;
  o.workers_per_host = workers_per_host;
  o.timeout_s = timeout_s;
  o.bind_cores = bind_cores;
  o.verbose_ranks = verbose_ranks;
}

launch::JobOptions LaunchFlags::job(int threads) const {
  train::TrainOptions o;
  copy_into(o);
  o.device = device;
  o.threads = threads;
  launch::JobOptions j = train::job_options(o);
  launch::check_job_options(j);
  return j;
}

}  // namespace dlscale::cli
