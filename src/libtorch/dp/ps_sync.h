#pragma once
// The worker's side of the parameter server (docs/strategies.md): pushes its
// gradient to the shards during backward, one message per shard bucket as
// soon as the bucket's gradients exist, and pulls the shards' new values in
// apply_update() (the shards own the optimizer). With --ps-placement
// colocated the process may host a shard too, on its own thread; this worker
// and that shard then talk through memory.
#include <memory>
#include <string>
#include <vector>

#include "libtorch/dp/gradient_sync.h"
#include "dp/ps_report.h"

namespace dlscale::dp {

/// Where a parameter-server job's shards and workers are.
struct PsLayout {
  comm::Communicator* comm = nullptr;  ///< workers and shards; point to point only
  std::vector<int> shard_ranks;        ///< rank in `comm` of each shard
  std::vector<int> worker_ranks;       ///< rank in `comm` of each worker
  int local_shard = -1;                ///< colocated: the shard this process hosts, else -1
};

/// Builds the worker side for `params` (registration order) and, when this
/// process hosts one, starts its shard. Worker 0 sends every shard its
/// initial values; every worker then pulls them (so after construction all
/// workers hold the shards' values). Collective over the PS layout.
std::unique_ptr<GradientSync> make_ps_sync(std::vector<torch::Tensor> params,
                                           const SyncOptions& options, const PsLayout& layout,
                                           const SyncContext& context);

/// The parameter server's section of a record (results.ps): placement, the
/// shards' bytes, the busiest shard's traffic and time, staleness, and each
/// shard's report (worker 0 has them; docs/metrics.md).
nlohmann::json ps_section(const PsOptions& options, const std::vector<int64_t>& shard_bytes,
                          double imbalance, const std::vector<ShardReport>& reports);
/// The console lines of that section: the header's, and the summary's.
std::string ps_header_line(const PsOptions& options, const std::vector<int64_t>& shard_bytes,
                           double imbalance);
std::vector<std::string> ps_summary_lines(const PsOptions& options,
                                          const std::vector<int64_t>& shard_bytes, double imbalance,
                                          const std::vector<ShardReport>& reports);

/// The element counts of `params`, as plan_ps() takes them.
std::vector<int64_t> param_numels(const std::vector<torch::Tensor>& params);

}  // namespace dlscale::dp
