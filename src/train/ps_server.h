#pragma once
// A dedicated parameter-server process (--ps-placement dedicated): it trains
// nothing; it serves one shard of the model's variables to the workers.
#include <functional>
#include <string>

#include "dp/gradient_sync.h"
#include "train/train_options.h"

namespace dlscale::train {

/// Serves shard `shard` of the job in `layout` (whose communicator is the
/// whole job's) until the run ends. The shard's variables follow from the
/// model the options name, planned as the workers plan them. `status`
/// receives progress lines. Throws dlscale::PeerFailure when a worker fails.
void run_ps_server(const TrainOptions& options, const dp::PsLayout& layout, int shard,
                   const std::function<void(const std::string&)>& status);

}  // namespace dlscale::train
