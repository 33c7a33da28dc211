#include "launch/job_options.h"

#include "cluster/cluster.h"
#include "comm/session.h"
#include "core/error.h"

namespace dlscale::launch {

void check_job_options(const JobOptions& o) {
  DLSCALE_CHECK(o.workers >= 1 && o.workers <= kMaxProcesses, "--workers must be in [1, {}] (got {})",
                kMaxProcesses, o.workers);
  DLSCALE_CHECK(o.servers >= 0 && o.servers <= kMaxProcesses,
                "--ps-shards must be at most {} (got {} dedicated servers)", kMaxProcesses,
                o.servers);
  DLSCALE_CHECK(o.nnodes >= 1 && o.nnodes <= kMaxProcesses, "--nnodes must be in [1, {}] (got {})",
                kMaxProcesses, o.nnodes);
  DLSCALE_CHECK(o.workers_per_host >= 1 && o.workers_per_host <= kMaxProcesses,
                "--workers-per-host must be in [1, {}] (got {})", kMaxProcesses,
                o.workers_per_host);
  DLSCALE_CHECK(o.threads_per_worker >= 0 && o.threads_per_worker <= kMaxProcesses,
                "--threads must be in [0, {}] (got {})", kMaxProcesses, o.threads_per_worker);
  DLSCALE_CHECK(o.node_rank >= 0 && o.node_rank < o.nnodes,
                "--node-rank must be in [0, {}) (got {})", o.nnodes, o.node_rank);
  DLSCALE_CHECK(o.master_port >= 1 && o.master_port <= 65535,
                "--master-port must be in [1, 65535] (got {})", o.master_port);
  if (!o.cluster.empty()) cluster::check_cluster_name(o.cluster);
  if (!o.backend.empty()) comm::check_backend(o.backend);
  DLSCALE_CHECK(o.backend != "nccl" || o.device.rfind("cuda", 0) == 0,
                "--backend nccl needs --device cuda");
  DLSCALE_CHECK(o.backend != "nccl" || !o.share_gpus,
                "--backend nccl cannot put several ranks on one GPU: drop --share-gpus or use "
                "--backend gloo");
  DLSCALE_CHECK(o.mpi_collectives == "blocking" || o.mpi_collectives == "polled",
                "unknown --mpi-collectives '{}'; allowed: blocking, polled", o.mpi_collectives);
  DLSCALE_CHECK(o.timeout.count() > 0, "--timeout must be > 0 seconds (got {})",
                static_cast<double>(o.timeout.count()) / 1000.0);
}

}  // namespace dlscale::launch
