#pragma once
// A rank that its strategy made a server (libtorch/dp/strategy.h: a dedicated
// parameter-server shard, say): it trains nothing and serves the run's
// workers; what it needs of the run comes from the train options.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "libtorch/dp/strategy.h"
#include "train/train_options.h"

namespace dlscale::train {

/// The model's parameter sizes (registration order), from a model built for
/// the purpose and not trained: what a strategy that lays the variables out
/// plans with.
std::vector<int64_t> model_numels(const ResolvedTrainOptions& config);

/// Serves the run `config` as `strategy`'s server until the run ends;
/// `status` receives progress lines. Throws dlscale::PeerFailure when a
/// worker fails.
void serve(dp::Strategy& strategy, const ResolvedTrainOptions& config,
           const std::function<void(const std::string&)>& status);

}  // namespace dlscale::train
