#include "libtorch/predict/zoo_profile.h"

#include <map>

#include "core/error.h"
#include "libtorch/models/layers.h"
#include "libtorch/models/model.h"

namespace dlscale::predict {

namespace {

/// Each parameter's forward MACs (by tensor): for a zoo model those of the
/// layer that owns it (a layer's weight carries them, the rest of its
/// tensors none); for a model that counts its operators (a TorchScript
/// module), each operator's go to the largest parameter among its operands.
std::map<const void*, double> macs_by_parameter(const models::ModelSpec& spec,
                                                const models::ModelOptions& o, models::Model& net) {
  std::map<const void*, double> macs_of;
  const std::optional<models::OpCount> ops =
      net.own_macs(models::probe_inputs(spec.task->inputs(spec, o)));
  if (ops) {
    std::map<const void*, torch::Tensor> by_storage;
    for (const auto& p : net.parameters()) {
      const void* storage = p.storage().unsafeGetStorageImpl();
      auto& held = by_storage[storage];
      if (!held.defined() || p.numel() > held.numel()) held = p;
    }
    for (const auto& op : ops->ops) {
      const torch::Tensor* owner = nullptr;
      for (const void* operand : op.operands) {
        const auto it = by_storage.find(operand);
        if (it != by_storage.end() && (owner == nullptr || it->second.numel() > owner->numel()))
          owner = &it->second;
      }
      if (owner != nullptr) macs_of[owner->unsafeGetTensorImpl()] += static_cast<double>(op.macs);
    }
    return macs_of;
  }
  for (const auto& m : net.modules(/*include_self=*/false)) {
    const auto* counter = dynamic_cast<const models::MacCounter*>(m.get());
    const auto own = m->parameters(/*recurse=*/false);
    if (counter != nullptr && !own.empty()) {
      macs_of[own.front().unsafeGetTensorImpl()] = static_cast<double>(counter->last_macs_per_sample());
    }
  }
  return macs_of;
}

}  // namespace

BackwardProfile flops_backward_profile(const std::string& model,
                                       const models::ModelOptions& options,
                                       double& flops_per_sample) {
  models::ModelOptions named = options;
  named.name = model;
  const models::ModelSpec& spec = models::model_spec(named);
  const models::ModelOptions o = models::resolve_options(spec, named);
  const std::shared_ptr<models::Model> net = spec.make(o);
  const models::ModelFacts facts =
      models::measure_model(spec, o, *net);  // runs the probe: each layer's MACs
  flops_per_sample = facts.flops_per_sample();
  const std::map<const void*, double> macs_of = macs_by_parameter(spec, o, *net);
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
