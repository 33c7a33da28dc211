#pragma once
// A model's backward profile without training it: each parameter tensor's
// bytes and, for when it is ready, the share of backward's FLOPs done by
// then (backward visits layers in reverse, each costing in proportion to
// its forward multiply-accumulates). A zoo model's layers count their MACs;
// a TorchScript module's operators are counted on a probe (libtorch/models/op_count.h).
#include <string>

#include "models/model_options.h"
#include "predict/workload.h"

namespace dlscale::predict {

/// Builds `model` (a zoo name or a TorchScript file, options resolved
/// against its spec) and returns its FLOP-proportional backward profile;
/// `flops_per_sample` receives its forward FLOPs. Throws dlscale::Error for
/// an unknown model or a module that cannot be loaded.
BackwardProfile flops_backward_profile(const std::string& model, const models::ModelOptions& options,
                                       double& flops_per_sample);

}  // namespace dlscale::predict
