#include "launch/launch_options.h"

#include "cluster/cluster.h"
#include "comm/backend.h"
#include "core/error.h"
#include "core/record_keys.h"

namespace dlscale::launch {
namespace {

constexpr double kMaxTimeoutS = 1e7;

}  // namespace

void check_job_options(const JobOptions& j) {
  const LaunchOptions& o = j.launch;
  DLSCALE_CHECK(o.workers >= 1 && o.workers <= kMaxProcesses, "--workers must be in [1, {}] (got {})",
                kMaxProcesses, o.workers);
  DLSCALE_CHECK(j.servers >= 0 && j.servers <= kMaxProcesses,
                "--ps-shards must be at most {} (got {} dedicated servers)", kMaxProcesses, j.servers);
  DLSCALE_CHECK(o.nnodes >= 1 && o.nnodes <= kMaxProcesses, "--nnodes must be in [1, {}] (got {})",
                kMaxProcesses, o.nnodes);
  DLSCALE_CHECK(o.workers_per_host >= 1 && o.workers_per_host <= kMaxProcesses,
                "--workers-per-host must be in [1, {}] (got {})", kMaxProcesses, o.workers_per_host);
  DLSCALE_CHECK(j.threads_per_worker >= 0 && j.threads_per_worker <= kMaxProcesses,
                "--threads must be in [0, {}] (got {})", kMaxProcesses, j.threads_per_worker);
  DLSCALE_CHECK(o.node_rank >= 0 && o.node_rank < o.nnodes, "--node-rank must be in [0, {}) (got {})",
                o.nnodes, o.node_rank);
  DLSCALE_CHECK(o.master_port >= 1 && o.master_port <= 65535,
                "--master-port must be in [1, 65535] (got {})", o.master_port);
  DLSCALE_CHECK(o.timeout_s > 0 && o.timeout_s <= kMaxTimeoutS,
                "--timeout must be in (0, {:g}] seconds (got {})", kMaxTimeoutS, o.timeout_s);
  if (!o.cluster.empty()) cluster::check_cluster_name(o.cluster);
  if (o.backend.empty()) return;  // chosen by the job (libtorch/launch/job.cpp)
  comm::check_backend(o.backend);
  const bool nccl = o.backend == "nccl";
  DLSCALE_CHECK(!nccl || j.device.rfind("cuda", 0) == 0, "--backend nccl needs --device cuda");
  DLSCALE_CHECK(!nccl || !j.share_gpus,
                "--backend nccl cannot put several ranks on one GPU: drop --share-gpus or use "
                "--backend gloo");
}

nlohmann::json launch_inputs(const LaunchOptions& o, const ClusterShape& c) {
  nlohmann::json j = nlohmann::json::object();
  record_inputs(o, j);
  j[record::input::kCluster] = cluster::cluster_json(
      o.cluster, c.hosts, o.workers_per_host, c.link_mbit, c.rack_hosts, c.uplink_mbit, c.tcp_cc);
  return j;
}

}  // namespace dlscale::launch
