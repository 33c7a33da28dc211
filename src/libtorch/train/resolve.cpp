#include "libtorch/train/resolve.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>

#include "core/error.h"
#include "core/files.h"
#include "core/sysinfo.h"
#include "libtorch/compute/devices.h"
#include "libtorch/data/data_spec.h"
#include "libtorch/dp/strategy.h"
#include "libtorch/models/model.h"
#include "train/convergence.h"
#include "train/train_options.h"

namespace dlscale::train {

namespace {

// Sane caps on counts and sizes (docs/errors.md, "Limits"): beyond them a
// value is a typo, not an experiment.
constexpr int64_t kMaxSteps = 1000000000;
constexpr int64_t kMaxBatch = 1 << 20;
constexpr int64_t kMaxGlobalBatch = 1 << 30;
constexpr int64_t kMaxAccumulate = 1 << 16;
constexpr int64_t kMaxImageSize = 4096;
constexpr int64_t kMaxClasses = 1000000;
constexpr int64_t kMaxVocab = 10000000;
constexpr int64_t kMaxSeqLen = 65536;
constexpr int64_t kMaxHidden = 65536;
constexpr int64_t kMaxSyntheticBatches = 4096;
constexpr int kMaxThreads = 1024;
constexpr int kMaxShards = 1024;
constexpr double kMaxRate = 1e6;
constexpr double kMaxMiB = 1e6;

/// The batch of one worker, from --batch (weak scaling) or --global-batch (strong).
void resolve_batch(ResolvedTrainOptions& r) {
  RunOptions& o = r.options.run;
  DLSCALE_CHECK(o.global_batch >= 0 && o.global_batch <= kMaxGlobalBatch,
                "--global-batch must be in [0, {}] (got {}; 0 = weak scaling)", kMaxGlobalBatch,
                o.global_batch);
  DLSCALE_CHECK(o.accumulate >= 1 && o.accumulate <= kMaxAccumulate,
                "--accumulate must be in [1, {}] (got {}; 1 = no accumulation)", kMaxAccumulate,
                o.accumulate);
  if (o.global_batch > 0) {
    DLSCALE_CHECK(o.global_batch % r.world_size == 0,
                  "--global-batch {} is not divisible by {} workers (strong scaling needs "
                  "global batch = workers x per-worker batch)",
                  o.global_batch, r.world_size);
    DLSCALE_CHECK(
        o.global_batch % (r.world_size * o.accumulate) == 0,
        "--global-batch {} is not divisible by {} workers x --accumulate {} (strong scaling "
        "needs global batch = workers x per-worker batch x micro-batches)",
        o.global_batch, r.world_size, o.accumulate);
    o.batch = o.global_batch / (r.world_size * o.accumulate);
    r.strong_scaling = true;
    DLSCALE_CHECK(o.batch <= kMaxBatch,
                  "--global-batch {} over {} worker(s) is {} per worker, over the per-worker cap "
                  "of {} (use more workers or a smaller global batch)",
                  o.global_batch, r.world_size, o.batch, kMaxBatch);
  }
  DLSCALE_CHECK(o.batch >= 1 && o.batch <= kMaxBatch, "--batch must be in [1, {}] (got {})",
                kMaxBatch, o.batch);
  DLSCALE_CHECK(o.batch * r.world_size <= kMaxGlobalBatch / o.accumulate,
                "--batch {} x {} workers x --accumulate {} is over the global batch cap of {}",
                o.batch, r.world_size, o.accumulate, kMaxGlobalBatch);
  r.global_batch = o.batch * r.world_size * o.accumulate;
}

void check_run(const RunOptions& o) {
  DLSCALE_CHECK(o.warmup >= 0, "--warmup must be >= 0 (got {})", o.warmup);
  DLSCALE_CHECK(o.steps <= kMaxSteps, "--steps must be at most {} (got {})", kMaxSteps, o.steps);
  DLSCALE_CHECK(o.steps > o.warmup,
                "--steps ({}) must be greater than --warmup ({}): steps include the warm-up and "
                "at least one step must be measured",
                o.steps, o.warmup);
  DLSCALE_CHECK(o.display_every >= 0, "--display-every must be >= 0 (got {})", o.display_every);
  DLSCALE_CHECK(o.synthetic_batches >= 1 && o.synthetic_batches <= kMaxSyntheticBatches,
                "--synthetic-batches must be in [1, {}] (got {})", kMaxSyntheticBatches,
                o.synthetic_batches);
}

void check_optimizer(const OptimizerOptions& o) {
  DLSCALE_CHECK(o.lr > 0 && o.lr <= kMaxRate, "--lr must be in (0, {:g}] (got {})", kMaxRate, o.lr);
  DLSCALE_CHECK(o.momentum >= 0 && o.momentum < 1, "--momentum must be in [0, 1) (got {})",
                o.momentum);
  DLSCALE_CHECK(o.weight_decay >= 0 && o.weight_decay <= kMaxRate,
                "--weight-decay must be in [0, {:g}] (got {})", kMaxRate, o.weight_decay);
  DLSCALE_CHECK(o.clip_grad_norm >= 0 && o.clip_grad_norm <= 1e9,
                "--clip-grad-norm must be in [0, 1e9] (got {}; 0 = no clipping)", o.clip_grad_norm);
  DLSCALE_CHECK(o.kind != OptimizerKind::kNesterov || o.momentum > 0,
                "--optimizer nesterov needs --momentum > 0 (got {})", o.momentum);
}

/// The model exists, and what the options give of its input fits it (the
/// data may still fill the rest: Task::shaped_by_data).
void check_model(const models::ModelOptions& o) {
  DLSCALE_CHECK(o.image_size >= 0 && o.image_size <= kMaxImageSize,
                "--image-size must be in [0, {}] (got {}; 0 = the model's default)", kMaxImageSize,
                o.image_size);
  DLSCALE_CHECK(o.num_classes >= 0 && o.num_classes <= kMaxClasses,
                "--classes must be in [0, {}] (got {}; 0 = the model's default)", kMaxClasses,
                o.num_classes);
  DLSCALE_CHECK(o.vocab >= 0 && o.vocab <= kMaxVocab, "--vocab must be in [0, {}] (got {}; 0 = the model's default)",
                kMaxVocab, o.vocab);
  DLSCALE_CHECK(o.seq_len >= 0 && o.seq_len <= kMaxSeqLen,
                "--seq-len must be in [0, {}] (got {}; 0 = the model's default)", kMaxSeqLen, o.seq_len);
  DLSCALE_CHECK(o.hidden >= 0 && o.hidden <= kMaxHidden,
                "--hidden must be in [0, {}] (got {}; 0 = the model's default)", kMaxHidden, o.hidden);
  models::resolve_options(models::model_spec(o), o);
}

void check_sync_caps(const dp::SyncOptions& o) {
  for (const auto& [flag, mb] : {std::pair{"--bucket-mb", o.bucket_mb},
                                 std::pair{"--first-bucket-mb", o.first_bucket_mb},
                                 std::pair{"--ps-partition-mb", o.ps.partition_mb}}) {
    DLSCALE_CHECK(mb <= kMaxMiB, "{} must be at most {:g} (got {})", flag, kMaxMiB, mb);
  }
  DLSCALE_CHECK(o.ps.shards <= kMaxShards, "--ps-shards must be at most {} (got {})", kMaxShards,
                o.ps.shards);
  DLSCALE_CHECK(o.ps.max_staleness <= kMaxSteps, "--max-staleness must be at most {} (got {})",
                kMaxSteps, o.ps.max_staleness);
  dp::check_sync_options(o);
}

void check_compute(ComputeOptions& o, int local_world_size) {
  DLSCALE_CHECK(o.threads >= 0 && o.threads <= kMaxThreads, "--threads must be in [0, {}] (got {})",
                kMaxThreads, o.threads);
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
  DLSCALE_CHECK(o.noise_every == RunOptions::kNoiseEveryAuto ||
                    (o.noise_every >= 0 && o.noise_every <= kMaxSteps),
                "--noise-every must be in [0, {}] (got {}; 0 = never)", kMaxSteps, o.noise_every);
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
  const std::string refusal = strategy->checkpoint_refusal();
  DLSCALE_CHECK(!needs.checkpoints || refusal.empty(),
                "--checkpoint/--resume save one replica and its optimizer; --strategy {} keeps "
                "{}, so it cannot be checkpointed",
                o.sync.strategy, refusal);
  DLSCALE_CHECK(!needs.checkpoints || o.data.order != data::DataOrder::kStreaming,
                "--checkpoint/--resume need --data-order global: a streaming shuffle buffer's "
                "position is not saved");
}

/// No two outputs (a {step} checkpoint pattern counted at every step it is
/// written at) and no output over --resume's file, except --checkpoint
/// continuing it.
void check_train_outputs(const TrainOptions& o) {
  const RecipeOptions& r = o.recipe;
  const int64_t steps = o.run.steps;
  const bool steps_known = r.epochs == 0;  // --epochs: the data's epoch length decides
  auto checkpoint_written = [&r, steps, steps_known](int64_t n) {
    if (n < 1 || (steps_known && n > steps)) return false;
    if (r.checkpoint_every > 0) return n % r.checkpoint_every == 0;
    if (r.checkpoint_every_epochs > 0 || !steps_known || r.target_accuracy > 0) return true;
    return n == steps;  // one checkpoint, at the end
  };
  OutputPath checkpoint{"--checkpoint", r.checkpoint_path};
  if (r.checkpoint_path.find("{step}") != std::string::npos) {
    checkpoint.step_written = checkpoint_written;
  }
  check_output_paths({{"--json", o.output.json_path},
                      {"--trace", o.output.trace_path},
                      {"--save-weights", o.output.save_weights},
                      {"--save-initial-weights", o.output.save_initial_weights},
                      {"--mllog", r.mllog_path},
                      checkpoint},
                     {{"--resume", r.resume_path, "--checkpoint"}});
  // Before any worker is spawned: the same line a lone worker gives.
  if (!r.resume_path.empty()) check_readable(r.resume_path);
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
  check_sync_caps(o.sync);
  resolve_batch(r);
  check_run(o.run);
  check_optimizer(o.optimizer);
  check_model(o.model);
  check_compute(o.compute, r.local_world_size);
  data::check_data_options(o.data);
  check_recipe(o.recipe);
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
