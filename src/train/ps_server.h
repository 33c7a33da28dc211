#pragma once
// A dedicated parameter-server process (--ps-placement dedicated): it trains
// nothing; it serves one shard of the model's variables to the workers.
#include <functional>
#include <string>

#include "dp/gradient_sync.h"
#include "dp/ps_plan.h"
#include "train/train_options.h"

namespace dlscale::train {

/// The placement of the model's variables on the shards, as every worker
/// and shard computes it. Throws dlscale::Error when it is impossible (more
/// shards than variables): `dlscale train` calls it before starting anything.
dp::PsPlan plan_ps_variables(const ResolvedTrainOptions& config);

/// Serves shard `shard` of the job in `layout` (whose communicator is the
/// whole job's) until the run ends. The shard's variables follow from the
/// model the options name, planned as the workers plan them. `status`
/// receives progress lines. Throws dlscale::PeerFailure when a worker fails.
void run_ps_server(const TrainOptions& options, const dp::PsLayout& layout, int shard,
                   const std::function<void(const std::string&)>& status);

}  // namespace dlscale::train
