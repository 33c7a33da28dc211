#pragma once
// How a job's processes start and find each other: the flags every job
// command shares (train, commbench), with their table (core/option_table.h),
// and the job plan a launcher carries out. Checked in one place.
#include <chrono>
#include <nlohmann/json.hpp>
#include <string>

#include "comm/backend.h"
#include "core/enum_names.h"
#include "core/option_table.h"

namespace dlscale::launch {

/// The most workers, nodes, servers or threads per worker a job may ask for
/// (docs/errors.md, "Limits"): more on one node is a typo.
inline constexpr int kMaxProcesses = 1024;

/// mpi: "blocking" (under a deadline watchdog; needs MPI_THREAD_MULTIPLE,
/// else falls back) or "polled" (non-blocking, polled against the deadline).
enum class MpiCollectives { kBlocking, kPolled };
const EnumNames<MpiCollectives, 2>& enum_names(MpiCollectives);

/// The launch flags.
struct LaunchOptions {
  int workers = 1;                        ///< worker processes on this node
  int nnodes = 1;                         ///< nodes, each running `workers` processes
  int node_rank = 0;                      ///< this node's index
  std::string master_addr = "127.0.0.1";  ///< host of the rendezvous store (node 0)
  int master_port = 29500;                ///< its port (multi-node; a local job picks a free one)
  /// Address the rendezvous store listens on; "" = master_addr, 0.0.0.0 = every interface.
  std::string master_bind;
  std::string host_addr;                  ///< address other nodes reach this node's workers at
  /// gloo | mpi | nccl; "" = mpi under mpirun, else nccl for --device cuda
  /// with a GPU per rank in a build with NCCL, else gloo.
  std::string backend;
  MpiCollectives mpi_collectives = MpiCollectives::kBlocking;
  /// An emulated cluster (docs/cluster.md) to run on: one node per host,
  /// `workers_per_host` workers each; "" = this machine's own network.
  std::string cluster;
  int workers_per_host = 1;
  double timeout_s = 60.0;  ///< a worker silent or a collective stuck this long fails the job
  bool bind_cores = false;
  bool verbose_ranks = false;
  /// Whether --master-addr / --master-port were on the command line: under
  /// mpirun or srun they then win over MASTER_ADDR/MASTER_PORT and what
  /// Slurm's environment implies (not flags; set by the CLI).
  bool master_addr_given = false;
  bool master_port_given = false;

  template <typename Self, typename Visitor>
  static void table(Self& s, Visitor&& v) {
    processes(s, v);
    meeting(s, v);
  }

 private:
  template <typename Self, typename Visitor>
  static void processes(Self& s, Visitor&& v) {
    v(Option{"--workers,-n", "Worker processes to spawn on this node (each works on its shard)", "workers"},
      s.workers);
    v(Option{"--timeout", "Seconds after which a silent worker or a stuck collective fails the job",
             "timeout_s"},
      s.timeout_s);
    v(Option{"--bind-cores", "Pin each local worker to its own --threads cores", "bind_cores"}, s.bind_cores);
    v(Option{"--verbose-ranks", "Let every rank print its report (default: rank 0 only)", nullptr},
      s.verbose_ranks);
    v(Option{"--cluster",
             "Run on the emulated cluster of this name (dlscale cluster up; needs root): --workers-per-host "
             "workers in each of its hosts, across its shaped links (docs/cluster.md)",
             nullptr}
          .no_default(),
      s.cluster);
    v(Option{"--workers-per-host", "--cluster: worker processes in each host", nullptr}, s.workers_per_host);
  }
  template <typename Self, typename Visitor>
  static void meeting(Self& s, Visitor&& v) {
    v(Option{"--backend",
             comm::backend_help() +
                 "; default: mpi under mpirun, nccl with --device cuda and a GPU per worker, gloo "
                 "otherwise (docs/gpu.md)",
             "backend"}
          .no_default(),
      s.backend);
    v(Option{"--mpi-collectives",
             "MPI backend: blocking (MPI's blocking collectives under a deadline watchdog that aborts the job "
             "at --timeout; needs MPI_THREAD_MULTIPLE, else polled) | polled (non-blocking collectives polled "
             "against --timeout; slower)",
             "mpi_collectives"},
      s.mpi_collectives);
    v(Option{"--nnodes", "Nodes in the job (run dlscale on each)", "nnodes"}, s.nnodes);
    v(Option{"--node-rank", "This node's index, 0 .. nnodes-1", nullptr}, s.node_rank);
    v(Option{"--master-addr", "Address of node 0, which hosts the rendezvous store", nullptr}, s.master_addr);
    v(Option{"--master-port", "Port of the rendezvous store (multi-node, mpirun/srun with gloo)", nullptr},
      s.master_port);
    v(Option{"--master-bind",
             "Address the rendezvous store listens on (node 0, or rank 0 under mpirun/srun); default: "
             "--master-addr; 0.0.0.0 = every interface. Every process of a job presents DLSCALE_JOB_SECRET to "
             "it (docs/launch.md)",
             "master_bind"}
          .no_default(),
      s.master_bind);
    v(Option{"--host-addr",
             "Address at which the other nodes reach this node's workers (multi-node Gloo); default: the "
             "address of this host's name",
             "host_addr"}
          .no_default(),
      s.host_addr);
  }
};

/// How a job's processes start and find each other: the launch flags and
/// what the job command adds (its device, threads, server processes).
struct JobOptions {
  LaunchOptions launch;
  /// Server processes besides the workers (dedicated parameter-server
  /// shards): the first `servers` ranks of the job; a launcher starts them on node 0.
  int servers = 0;
  std::string device = "cpu";  ///< cpu | cuda | cuda:N (libtorch/compute/devices.h)
  bool share_gpus = false;     ///< several local workers per GPU
  int threads_per_worker = 1;  ///< OMP_NUM_THREADS of spawned workers and core pinning
  std::chrono::milliseconds timeout() const {
    return std::chrono::milliseconds(static_cast<int64_t>(launch.timeout_s * 1000));
  }
};

/// Throws dlscale::Error with a one-line message naming the bad value.
void check_job_options(const JobOptions& options);

/// The record's part of the launch (inputs: workers, nodes, backend,
/// timeout, the cluster and its topology: `hosts`, `link_mbit`, racks).
/// `cluster` is cluster::ClusterSpec's shape (hosts, links, racks) of the
/// cluster the job runs on; its name is options.cluster.
struct ClusterShape {
  int hosts = 0;
  double link_mbit = 0;
  int rack_hosts = 0;
  double uplink_mbit = 0;
  std::string tcp_cc;  ///< "" = not known
};
nlohmann::json launch_inputs(const LaunchOptions& options, const ClusterShape& cluster);

}  // namespace dlscale::launch
