#include "libtorch/train/serve.h"

#include "libtorch/compute/threads.h"
#include "libtorch/data/data_spec.h"
#include "libtorch/models/model.h"
#include "libtorch/train/optimizer.h"
#include "libtorch/train/resolve.h"

namespace dlscale::train {

std::vector<int64_t> model_numels(const ResolvedTrainOptions& c) {
  // Only the shapes matter: a server's values come from worker 0.
  const models::ModelSpec& spec = models::model_spec(c.options.model);
  const auto model = spec.make(models::resolve_options(spec, c.options.model));
  std::vector<int64_t> numels;
  for (const auto& p : model->parameters()) numels.push_back(p.numel());
  return numels;
}

void serve(dp::Strategy& strategy, const ResolvedTrainOptions& config,
           const std::function<void(const std::string&)>& status) {
  set_compute_threads(config.options.compute.threads);
  // The model's shapes, as the workers' data shapes them.
  ResolvedTrainOptions c = config;
  open_training_data(c);
  dp::ServeContext context;
  context.numels = model_numels(c);
  context.element_bytes = static_cast<int64_t>(torch::elementSize(torch::kFloat32));
  context.make_optimizer = optimizer_factory(c);
  context.steps = c.options.run.steps;
  context.warmup = c.options.run.warmup;
  context.noise_every = c.options.run.noise_every;
  context.status = status;
  strategy.serve(context);
}

}  // namespace dlscale::train
