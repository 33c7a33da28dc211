#include "train/ps_server.h"

#include "core/error.h"
#include "core/threads.h"
#include "dp/ps_plan.h"
#include "dp/ps_shard.h"
#include "dp/ps_sync.h"
#include "train/optimizer.h"

namespace dlscale::train {

dp::PsPlan plan_ps_variables(const ResolvedTrainOptions& c) {
  // Only the shapes matter: a shard's values come from worker 0.
  const models::ModelSpec& spec = models::find_model(c.options.model);
  const auto model = spec.make(models::resolve_options(spec, model_options(c.options)));
  return dp::plan_ps(dp::param_numels(model->parameters()), c.sync.ps.shards, c.sync.ps.assign,
                     c.sync.ps.partition_mb, c.sync.bucket_mb, c.sync.first_bucket_mb);
}

void run_ps_server(const TrainOptions& options, const dp::PsLayout& layout, int shard,
                   const std::function<void(const std::string&)>& status) {
  const int workers = static_cast<int>(layout.worker_ranks.size());
  const ResolvedTrainOptions c = resolve_train_options(options, workers);
  set_compute_threads(c.options.threads);
  const dp::PsPlan plan = plan_ps_variables(c);
  dp::PsShardConfig config;
  config.shard = shard;
  config.plan = plan.shards[shard];
  for (int r : layout.worker_ranks) config.workers.push_back({layout.comm, r});
  config.steps = c.options.steps;
  config.warmup = c.options.warmup;
  config.mode = c.sync.ps.mode;
  config.max_staleness = c.sync.ps.max_staleness;
  config.make_optimizer = optimizer_factory(c);
  config.on_update = [&status, shard](int64_t version) {
    status(fmt::format("ps shard {} at version {}", shard, version));
  };
  dp::PsShard(std::move(config)).run();
  status(fmt::format("ps shard {} done", shard));
}

}  // namespace dlscale::train
