#pragma once
// The worker's side of the parameter server (docs/strategies.md): pushes its
// gradient to the shards during backward, one message per shard bucket as
// soon as the bucket's gradients exist, and pulls the shards' new values in
// apply_update() (the shards own the optimizer). With --ps-placement
// colocated the process may host a shard too, on its own thread; this worker
// and that shard then talk through memory.
#include <memory>

#include "dp/gradient_sync.h"

namespace dlscale::dp {

/// Builds the worker side for `params` (registration order) and, when this
/// process hosts one, starts its shard. Worker 0 sends every shard its
/// initial values; every worker then pulls them (so after construction all
/// workers hold the shards' values). Collective over the PS layout.
std::unique_ptr<GradientSync> make_ps_sync(std::vector<torch::Tensor> params,
                                           const SyncOptions& options, const PsSetup& setup);

/// The element counts of `params`, as plan_ps() takes them.
std::vector<int64_t> param_numels(const std::vector<torch::Tensor>& params);

}  // namespace dlscale::dp
