#pragma once
// How a job's processes start and find each other: the launch part of every
// job command's options (train, commbench), checked in one place.
#include <chrono>
#include <string>

namespace dlscale::launch {

/// The most workers, nodes, servers or threads per worker a job may ask for
/// (docs/errors.md, "Limits"): more on one node is a typo.
inline constexpr int kMaxProcesses = 1024;

/// How a job's processes start and find each other.
struct JobOptions {
  int workers = 1;                        ///< worker processes on this node
  /// Server processes besides the workers (dedicated parameter-server
  /// shards): the first `servers` ranks of the job; a launcher starts them on node 0.
  int servers = 0;
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
  std::string device = "cpu";             ///< cpu | cuda | cuda:N (compute/devices.h)
  bool share_gpus = false;                ///< several local workers per GPU
  /// mpi: "blocking" (under a deadline watchdog; needs MPI_THREAD_MULTIPLE,
  /// else falls back) or "polled" (non-blocking, polled against the deadline).
  std::string mpi_collectives = "blocking";
  std::chrono::milliseconds timeout{60000};  ///< collectives, rendezvous, stalled workers
  /// An emulated cluster (docs/cluster.md) to run on: one node per host,
  /// `workers_per_host` workers each; "" = this machine's own network.
  std::string cluster;
  int workers_per_host = 1;
  int threads_per_worker = 1;  ///< OMP_NUM_THREADS of spawned workers and core pinning
  bool bind_cores = false;
  bool verbose_ranks = false;
};

/// Throws dlscale::Error with a one-line message naming the bad value.
void check_job_options(const JobOptions& options);

}  // namespace dlscale::launch
