#include "predict/zoo_profile.h"

#include <map>

#include "core/error.h"
#include "models/layers.h"
#include "models/model.h"

namespace dlscale::predict {

BackwardProfile flops_backward_profile(const std::string& model, const models::ModelOptions& options,
                                       double& flops_per_sample) {
  DLSCALE_CHECK(
      !models::is_script_model(model),
      "predict profiles the zoo's models by their layers; for TorchScript model '{}', give "
      "--calibrate the record of 'dlscale train --model {} --trace T --json R' (its measured "
      "backward profile)",
      model, model);
  const models::ModelSpec& spec = models::find_model(model);
  const models::ModelOptions o = models::resolve_options(spec, options);
  const std::shared_ptr<models::Model> net = spec.make(o);
  const models::ModelFacts facts = models::measure_model(spec, o, *net);  // runs the probe: each layer's MACs
  flops_per_sample = facts.flops_per_sample();
  // Each parameter's cost is the MACs of the layer that owns it (a layer's
  // weight carries them, the rest of its tensors none).
  std::map<const void*, double> macs_of;
  for (const auto& m : net->modules(/*include_self=*/false)) {
    const auto* counter = dynamic_cast<const models::MacCounter*>(m.get());
    const auto own = m->parameters(/*recurse=*/false);
    if (counter != nullptr && !own.empty()) {
      macs_of[own.front().unsafeGetTensorImpl()] = static_cast<double>(counter->last_macs_per_sample());
    }
  }
  const std::vector<torch::Tensor> params = net->parameters();
  std::vector<double> cost(params.size(), 0.0);
  double total = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    const auto it = macs_of.find(params[i].unsafeGetTensorImpl());
    cost[i] = it == macs_of.end() ? 0.0 : it->second;
    total += cost[i];
  }
  BackwardProfile profile;
  profile.source = "FLOPs of each layer";
  profile.bytes.resize(params.size());
  profile.ready_fraction.resize(params.size());
  // Backward runs from the last parameter to the first; a tensor is ready
  // once its layer's share is done.
  double done = 0;
  for (size_t k = params.size(); k-- > 0;) {
    done += cost[k];
    profile.bytes[k] = params[k].numel() * static_cast<int64_t>(params[k].element_size());
    profile.ready_fraction[k] = total > 0 ? done / total : 1.0;
  }
  return profile;
}

}  // namespace dlscale::predict
