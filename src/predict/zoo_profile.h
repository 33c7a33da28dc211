#pragma once
// A zoo model's backward profile without running it: each parameter
// tensor's bytes and, for when it is ready, the share of backward's FLOPs
// done by then (backward visits layers in reverse, each costing in
// proportion to its forward multiply-accumulates).
#include <string>

#include "models/model_options.h"
#include "predict/workload.h"

namespace dlscale::predict {

/// Builds `model` (options resolved against its spec) and returns its
/// FLOP-proportional backward profile; `flops_per_sample` receives its
/// forward FLOPs. Throws dlscale::Error for an unknown model.
BackwardProfile flops_backward_profile(const std::string& model, const models::ModelOptions& options,
                                       double& flops_per_sample);

}  // namespace dlscale::predict
