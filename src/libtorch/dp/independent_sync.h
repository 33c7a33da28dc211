#pragma once
// Strategy `independent` (tf_cnn_benchmarks' variable_update=independent):
// no exchange at all; each worker trains its own replica on its own shard.
// The compute-only ceiling that shows what communication costs.
#include <memory>

#include "libtorch/dp/gradient_sync.h"

namespace dlscale::dp {

std::unique_ptr<GradientSync> make_independent_sync();

}  // namespace dlscale::dp
