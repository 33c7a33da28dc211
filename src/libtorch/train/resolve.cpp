#include "libtorch/train/resolve.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>

#include "core/error.h"
#include "core/sysinfo.h"
#include "libtorch/compute/devices.h"
#include "libtorch/data/data_spec.h"
#include "libtorch/dp/strategy.h"
#include "libtorch/models/model.h"
#include "train/convergence.h"
#include "train/train_checks.h"
#include "train/train_options.h"

namespace dlscale::train {

namespace {

void check_compute(ComputeOptions& o, int local_world_size) {
  if (o.threads == 0) o.threads = std::max(1, available_cores() / local_world_size);
  // The device parses and exists (which GPU a worker gets is decided later,
  // by its local rank: libtorch/compute/devices.h).
  worker_device(o.device, 0, 1, /*share_gpus=*/true);
  DLSCALE_CHECK(o.amp != AmpMode::kFp16 || torch::Device(o.device).is_cuda(),
                "--amp fp16 needs --device cuda (on CPU use --amp bf16)");
}

/// What the run asks of its strategy, the noise scale aside.
dp::RunNeeds run_needs(const ResolvedTrainOptions& r) {
  const TrainOptions& o = r.options;
  const RecipeOptions& recipe = o.recipe;
  dp::RunNeeds needs;
  needs.per_tensor_update =
      o.optimizer.kind == OptimizerKind::kLars || recipe.wd_exclude == DecayExclusion::kBiasNorm;
  needs.changing_rate = recipe.lr_schedule != LrScheduleKind::kConstant || recipe.warmup_epochs > 0;
  needs.checkpoints = !recipe.checkpoint_path.empty() || !recipe.resume_path.empty();
  needs.stops_early = recipe.target_accuracy > 0;
  needs.steps_from_data = recipe.epochs > 0;
  needs.loss_scaling = o.compute.amp == AmpMode::kFp16;
  needs.buffers_every_step = o.sync.sync_buffers == dp::SyncBuffers::kStep;
  needs.clips_gradients = o.optimizer.clip_grad_norm > 0;
  needs.sparse_gradients = o.model.sparse_embeddings;
  needs.workers = r.world_size;
  return needs;
}

/// Why the run cannot measure the gradient noise scale ("" if it can): it
/// needs two batch sizes, and on several workers their averaged gradient,
/// which the strategy's own check says whether it holds.
std::string noise_refusal(const ResolvedTrainOptions& r, const dp::Strategy& strategy,
                          dp::RunNeeds needs) {
  if (r.world_size == 1 && r.options.run.accumulate < 2) {
    return "--noise-scale compares gradients over two batch sizes: give 2 or more workers, or "
           "--accumulate 2 or more on one worker";
  }
  needs.averaged_gradient = true;
  try {
    strategy.check(needs);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

/// --noise-every's default: every step with --noise-scale, else every
/// kNoiseEveryDefault-th where the run can measure it and never where it
/// cannot. Asked for (--noise-scale, or --noise-every N >= 1), a run that
/// cannot is refused.
void resolve_noise(RunOptions& o, const std::string& refusal) {
  DLSCALE_CHECK(!o.noise_scale || o.noise_every != 0,
                "--noise-scale asks for the gradient noise scale and --noise-every 0 for none: "
                "give one of them");
  const bool asked = o.noise_scale || o.noise_every > 0;
  DLSCALE_CHECK(!asked || refusal.empty(), "{}", refusal);
  if (o.noise_every != RunOptions::kNoiseEveryAuto) return;
  if (o.noise_scale) {
    o.noise_every = 1;
  } else {
    o.noise_every = refusal.empty() ? RunOptions::kNoiseEveryDefault : 0;
  }
}

/// What the run asks that its strategy may not honour, refused up front;
/// then whether the noise scale is measured, and how often.
void check_strategy(ResolvedTrainOptions& r) {
  const TrainOptions& o = r.options;
  const dp::RunNeeds needs = run_needs(r);
  const std::unique_ptr<dp::Strategy> strategy = dp::make_strategy(o.sync);
  strategy->check(needs);
  resolve_noise(r.options.run, noise_refusal(r, *strategy, needs));
  if (o.run.noise_final > 0) {
    dp::RunNeeds final_needs = needs;
    final_needs.whole_average = true;
    strategy->check(final_needs);
  }
  const std::string refusal = strategy->checkpoint_refusal();
  DLSCALE_CHECK(!needs.checkpoints || refusal.empty(),
                "--checkpoint/--resume save one replica and its optimizer; --strategy {} keeps "
                "{}, so it cannot be checkpointed",
                o.sync.strategy, refusal);
  DLSCALE_CHECK(!needs.checkpoints || o.data.order != data::DataOrder::kStreaming,
                "--checkpoint/--resume need --data-order global: a streaming shuffle buffer's "
                "position is not saved");
}

}  // namespace

ResolvedTrainOptions resolve_train_options(const TrainOptions& in, int world_size,
                                           int local_world_size) {
  DLSCALE_ASSERT(world_size >= 1);
  ResolvedTrainOptions r;
  r.options = in;
  TrainOptions& o = r.options;
  r.world_size = world_size;
  r.local_world_size = local_world_size > 0 ? local_world_size : world_size;
  check_train_options(o);
  resolve_batch(r);
  // The model exists, and what the options give of its input fits it (the
  // data may still fill the rest: Task::shaped_by_data).
  models::resolve_options(models::model_spec(o.model), o.model);
  check_compute(o.compute, r.local_world_size);
  check_strategy(r);
  const models::ModelSpec& spec = models::model_spec(o.model);
  r.channels = spec.task->dataset_channels(spec);
  if (o.recipe.label_smoothing < 0) o.recipe.label_smoothing = spec.default_label_smoothing;
  r.measured_steps = o.run.steps - o.run.warmup;
  check_train_outputs(o);
  return r;
}

data::OpenedData open_training_data(ResolvedTrainOptions& r, int rank, const ExchangeParts& exchange) {
  const models::ModelSpec& spec = models::model_spec(r.options.model);
  const models::Task& task = *spec.task;
  if (data::parse_data_spec(r.options.data.spec).kind != "synthetic") {
    // A model its task cannot feed from a dataset is named before anything is opened.
    const std::string mismatch = task.dataset_mismatch(spec, r.options.model, r.options.data.spec);
    DLSCALE_CHECK(mismatch.empty(), "{}", mismatch);
  }
  const bool own_shards =
      r.options.data.order == data::DataOrder::kStreaming && r.world_size > 1 && exchange != nullptr;
  data::ShardPick pick;
  if (own_shards) {
    DLSCALE_ASSERT(rank >= 0 && rank < r.world_size);
    pick = {rank, r.world_size};
  }
  data::OpenedData opened = data::open_data(r.options.data, r.channels, data::Split::kTrain, pick);
  std::optional<data::DatasetInfo> whole;
  if (opened.dataset) whole = opened.dataset->info();
  if (opened.dataset && own_shards) {
    opened.parts = data::agree_parts(exchange(opened.dataset->info()));
    whole = data::as_whole(*whole, opened.parts);
  }
  r.options.model = task.shaped_by_data(spec, r.options.model, whole ? &*whole : nullptr);
  return opened;
}

void apply_epochs(ResolvedTrainOptions& r, int64_t steps_per_epoch) {
  RunOptions& o = r.options.run;
  const double epochs = r.options.recipe.epochs;
  if (epochs <= 0) return;
  DLSCALE_ASSERT(steps_per_epoch >= 1);
  o.steps = std::max<int64_t>(1, epochs_to_steps(epochs, steps_per_epoch));
  DLSCALE_CHECK(o.steps > o.warmup,
                "--epochs {:g} is {} steps of {} per epoch, not more than --warmup {}: train "
                "longer or lower --warmup",
                epochs, o.steps, steps_per_epoch, o.warmup);
  r.measured_steps = o.steps - o.warmup;
}

nlohmann::json inputs_json(const ResolvedTrainOptions& c) {
  const TrainOptions& o = c.options;
  nlohmann::json j = c.launch_inputs;
  record_inputs(o.model, j);
  record_inputs(o.run, j);
  record_inputs(o.optimizer, j);
  record_inputs(o.data, j);
  record_inputs(o.sync, j);
  record_inputs(o.sync.ps, j);
  record_inputs(o.compute, j);
  record_inputs(o.output, j);
  j["recipe"] = recipe_json(o.recipe);
  j["global_batch"] = c.global_batch;
  j[record::input::kWorldSize] = c.world_size;
  j["local_world_size"] = c.local_world_size;
  j["scaling"] = c.strong_scaling ? "strong" : "weak";
  j["measured_steps"] = c.measured_steps;
  j["channels"] = c.channels;
  return j;
}

nlohmann::json agreed_inputs(const ResolvedTrainOptions& c) {
  const TrainOptions& o = c.options;
  nlohmann::json j = nlohmann::json::object();
  dlscale::agreed_inputs(o.model, j);
  dlscale::agreed_inputs(o.run, j);
  dlscale::agreed_inputs(o.optimizer, j);
  dlscale::agreed_inputs(o.data, j);
  dlscale::agreed_inputs(o.sync, j);
  dlscale::agreed_inputs(o.sync.ps, j);
  dlscale::agreed_inputs(o.compute, j);
  // Every recipe option shapes the training (each step's rate, when to
  // evaluate and to stop), so all must agree: a rank that stops at another
  // target than its peers would leave them waiting in a collective.
  const nlohmann::json recipe = recipe_json(o.recipe);
  for (const auto& [key, value] : recipe.items()) j["recipe." + key] = value;
  j["global_batch"] = c.global_batch;
  j[record::input::kWorldSize] = c.world_size;
  // A model read from files (a TorchScript module and its task file), by
  // their contents: hand-started nodes may hold different files at one path.
  const std::string& digest = models::model_spec(o.model).file_digest;
  if (!digest.empty()) j["model_file_digest"] = digest;
  return j;
}

}  // namespace dlscale::train
