#pragma once
// `dlscale train --cluster N --workers-per-host W` (and commbench): runs one
// node launcher inside each host of an emulated cluster (docs/cluster.md),
// as `--nnodes K --node-rank h --master-addr <host 0> --host-addr <host h>`,
// so the rendezvous and every collective cross the cluster's shaped links.
// Supervises them like the local launcher supervises workers: the first
// host to fail stops the job on every host, and the error names the host,
// its address and ranks, and what its launcher said (which names the rank).
// Never leaves a process behind in any host.
#include <chrono>
#include <string>
#include <vector>

#include "core/child_process.h"

namespace dlscale::launch {

struct ClusterPlan {
  std::string cluster;            ///< an up cluster's name
  int workers_per_host = 1;       ///< worker processes in each host
  int servers = 0;                ///< dedicated PS shards (on host 0)
  int master_port = 29500;        ///< the rendezvous port on host 0
  std::string binary = self_executable();
  /// When set, each host's node launcher is a fork of this process that
  /// enters the host and runs run(argc, argv) instead of executing `binary`
  /// (SpawnOptions::run): LibTorch is not loaded again in every host.
  int (*run)(int argc, char** argv) = nullptr;
  std::vector<std::string> argv;  ///< this command's arguments, argv[0] included
  /// After the first host fails, how long the others get to end by themselves
  /// (and say why) before they are stopped.
  std::chrono::milliseconds grace{3000};
};

/// Refuses, naming it, a flag of `argv` (argv[0] included) that --cluster
/// sets for every host itself (--workers, --nnodes, the addresses...).
void refuse_cluster_set_flags(const std::vector<std::string>& argv);

/// Runs the job on every host; returns when all node launchers exited 0.
/// Throws dlscale::Error when the cluster is not up or this process may not
/// enter its namespaces, JobFailed when a host failed.
void run_cluster_job(const ClusterPlan& plan);

}  // namespace dlscale::launch
