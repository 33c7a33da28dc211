#include "train/train_options.h"

#include <algorithm>
#include <cmath>
#include <torch/torch.h>

#include "core/enum_names.h"
#include "compute/devices.h"
#include "core/error.h"
#include "core/files.h"
#include "core/sysinfo.h"
#include "compute/torch_compat.h"
#include "dp/strategy.h"
#include "models/model.h"

namespace dlscale::train {

namespace {

constexpr EnumNames<OptimizerKind, 5> kOptimizers{
    "optimizer",
    {{{OptimizerKind::kSgd, "sgd"},
      {OptimizerKind::kMomentum, "momentum"},
      {OptimizerKind::kNesterov, "nesterov"},
      {OptimizerKind::kAdam, "adam"},
      {OptimizerKind::kLars, "lars"}}}};
constexpr EnumNames<MemoryFormat, 2> kMemoryFormats{
    "memory format",
    {{{MemoryFormat::kChannelsLast, "channels-last"}, {MemoryFormat::kContiguous, "contiguous"}}}};
constexpr EnumNames<SyncBuffers, 3> kSyncBuffers{
    "--sync-buffers",
    {{{SyncBuffers::kNone, "none"}, {SyncBuffers::kInit, "init"}, {SyncBuffers::kStep, "step"}}}};

}  // namespace

OptimizerKind parse_optimizer(const std::string& name) { return kOptimizers.parse(name); }
std::string to_string(OptimizerKind kind) { return kOptimizers.name(kind); }
MemoryFormat parse_memory_format(const std::string& name) { return kMemoryFormats.parse(name); }
std::string to_string(MemoryFormat format) { return kMemoryFormats.name(format); }
SyncBuffers parse_sync_buffers(const std::string& name) { return kSyncBuffers.parse(name); }
std::string to_string(SyncBuffers policy) { return kSyncBuffers.name(policy); }

namespace {

/// The device parses and exists (which GPU a worker gets is decided later,
/// by its local rank: compute/devices.h).
void check_device(const std::string& device) { worker_device(device, 0, 1, /*share_gpus=*/true); }

}  // namespace

models::ModelOptions model_options(const TrainOptions& o) {
  models::ModelOptions mo;
  mo.num_classes = o.num_classes;
  mo.image_size = o.image_size;
  mo.aux_logits = o.aux_logits;
  mo.dropout = o.dropout;
  return mo;
}

namespace {

// Sane caps on counts and sizes (docs/errors.md, "Limits"): beyond them a
// value is a typo, not an experiment.
constexpr int64_t kMaxSteps = 1000000000;
constexpr int64_t kMaxBatch = 1 << 20;
constexpr int64_t kMaxGlobalBatch = 1 << 30;
constexpr int64_t kMaxImageSize = 4096;
constexpr int64_t kMaxClasses = 1000000;
constexpr int64_t kMaxSyntheticBatches = 4096;
constexpr double kMaxRate = 1e6;
constexpr double kMaxMiB = 1e6;
constexpr double kMaxTimeoutS = 1e7;

/// What the run asks that its strategy may not honour, refused up front.
void check_strategy(const ResolvedTrainOptions& r) {
  const RecipeOptions& recipe = r.options.recipe;
  dp::RunNeeds needs;
  needs.per_tensor_update = r.optimizer == OptimizerKind::kLars || recipe.wd_exclude == "bias-norm";
  needs.changing_rate = recipe.lr_schedule != "constant" || recipe.warmup_epochs > 0;
  needs.checkpoints = !recipe.checkpoint_path.empty() || !recipe.resume_path.empty();
  needs.stops_early = recipe.target_accuracy > 0;
  needs.loss_scaling = r.amp == AmpMode::kFp16;
  needs.buffers_every_step = r.sync_buffers == SyncBuffers::kStep;
  needs.workers = r.world_size;
  const std::unique_ptr<dp::Strategy> strategy = dp::make_strategy(r.sync);
  strategy->check(needs);
  const std::string refusal = strategy->checkpoint_refusal();
  DLSCALE_CHECK(!needs.checkpoints || refusal.empty(),
                "--checkpoint/--resume save one replica and its optimizer; --strategy {} keeps "
                "{}, so it cannot be checkpointed",
                r.options.strategy, refusal);
  DLSCALE_CHECK(!needs.checkpoints || r.options.data.order != "streaming",
                "--checkpoint/--resume need --data-order global: a streaming shuffle buffer's "
                "position is not saved");
}

/// No two outputs (a {step} checkpoint pattern counted at every step it is
/// written at) and no output over --resume's file, except --checkpoint
/// continuing it.
void check_train_outputs(const TrainOptions& o) {
  const RecipeOptions& r = o.recipe;
  const bool steps_known = r.epochs == 0;  // --epochs: the data's epoch length decides
  auto checkpoint_written = [&r, &o, steps_known](int64_t n) {
    if (n < 1 || (steps_known && n > o.steps)) return false;
    if (r.checkpoint_every > 0) return n % r.checkpoint_every == 0;
    if (r.checkpoint_every_epochs > 0 || !steps_known || r.target_accuracy > 0) return true;
    return n == o.steps;  // one checkpoint, at the end
  };
  OutputPath checkpoint{"--checkpoint", r.checkpoint_path};
  if (r.checkpoint_path.find("{step}") != std::string::npos) {
    checkpoint.step_written = checkpoint_written;
  }
  check_output_paths({{"--json", o.json_path},
                      {"--trace", o.trace_path},
                      {"--save-weights", o.save_weights},
                      {"--mllog", r.mllog_path},
                      checkpoint},
                     {{"--resume", r.resume_path, "--checkpoint"}});
}

}  // namespace

dp::SyncOptions sync_options(const TrainOptions& o) {
  dp::SyncOptions s;
  s.strategy = dp::parse_strategy(o.strategy);
  s.compress = dp::parse_compression(o.compress);
  s.bucket_mb = o.bucket_mb;
  s.first_bucket_mb = o.first_bucket_mb;
  s.ranks_per_node = o.ranks_per_node;
  s.ps.shards = o.ps_shards;
  s.ps.placement = dp::parse_ps_placement(o.ps_placement);
  s.ps.assign = dp::parse_ps_assign(o.ps_assign);
  s.ps.partition_mb = o.ps_partition_mb;
  s.ps.mode = dp::parse_ps_mode(o.ps_mode);
  s.ps.max_staleness = o.max_staleness;
  return s;
}

launch::JobOptions job_options(const TrainOptions& o) {
  launch::JobOptions j;
  j.workers = o.workers;
  j.nnodes = o.nnodes;
  j.node_rank = o.node_rank;
  j.master_addr = o.master_addr;
  j.master_port = o.master_port;
  j.master_bind = o.master_bind;
  j.host_addr = o.host_addr;
  j.backend = o.backend;
  j.device = o.device;
  j.share_gpus = o.share_gpus;
  j.mpi_collectives = o.mpi_collectives;
  j.cluster = o.cluster;
  j.workers_per_host = o.workers_per_host;
  DLSCALE_CHECK(o.timeout_s > 0 && o.timeout_s <= kMaxTimeoutS,
                "--timeout must be in (0, {:g}] seconds (got {})", kMaxTimeoutS, o.timeout_s);
  j.timeout = std::chrono::milliseconds(static_cast<int64_t>(o.timeout_s * 1000));
  j.threads_per_worker = o.threads;
  j.bind_cores = o.bind_cores;
  j.verbose_ranks = o.verbose_ranks;
  // Servers (dedicated parameter-server shards) are processes of the job, not workers.
  j.servers = dp::make_strategy(sync_options(o))->servers();
  return j;
}

ResolvedTrainOptions resolve_train_options(const TrainOptions& in, int world_size,
                                           int local_world_size) {
  ResolvedTrainOptions r;
  r.options = in;
  TrainOptions& o = r.options;
  const models::ModelSpec& spec = models::find_model(o.model);
  launch::check_job_options(job_options(o));
  r.sync = sync_options(o);
  dp::check_sync_options(r.sync);
  r.sync_buffers = parse_sync_buffers(o.sync_buffers);
  r.world_size = world_size > 0 ? world_size : o.nnodes * o.workers;
  r.local_world_size = local_world_size > 0 ? local_world_size : o.workers;
  DLSCALE_CHECK(o.global_batch >= 0 && o.global_batch <= kMaxGlobalBatch,
                "--global-batch must be in [0, {}] (got {}; 0 = weak scaling)", kMaxGlobalBatch,
                o.global_batch);
  if (o.global_batch > 0) {
    DLSCALE_CHECK(o.global_batch % r.world_size == 0,
                  "--global-batch {} is not divisible by {} workers (strong scaling needs "
                  "global batch = workers x per-worker batch)",
                  o.global_batch, r.world_size);
    o.batch = o.global_batch / r.world_size;
    r.strong_scaling = true;
    DLSCALE_CHECK(o.batch <= kMaxBatch,
                  "--global-batch {} over {} worker(s) is {} per worker, over the per-worker cap "
                  "of {} (use more workers or a smaller global batch)",
                  o.global_batch, r.world_size, o.batch, kMaxBatch);
  }
  DLSCALE_CHECK(o.batch >= 1 && o.batch <= kMaxBatch, "--batch must be in [1, {}] (got {})",
                kMaxBatch, o.batch);
  DLSCALE_CHECK(o.warmup >= 0, "--warmup must be >= 0 (got {})", o.warmup);
  DLSCALE_CHECK(o.steps <= kMaxSteps, "--steps must be at most {} (got {})", kMaxSteps, o.steps);
  DLSCALE_CHECK(o.steps > o.warmup,
                "--steps ({}) must be greater than --warmup ({}): steps include the warm-up and "
                "at least one step must be measured",
                o.steps, o.warmup);
  // --threads, like --workers, is checked with the job options above.
  if (o.threads == 0) o.threads = std::max(1, available_cores() / r.local_world_size);
  DLSCALE_CHECK(o.lr > 0 && o.lr <= kMaxRate, "--lr must be in (0, {:g}] (got {})", kMaxRate, o.lr);
  DLSCALE_CHECK(o.momentum >= 0 && o.momentum < 1, "--momentum must be in [0, 1) (got {})",
                o.momentum);
  DLSCALE_CHECK(o.weight_decay >= 0 && o.weight_decay <= kMaxRate,
                "--weight-decay must be in [0, {:g}] (got {})", kMaxRate, o.weight_decay);
  DLSCALE_CHECK(o.display_every >= 0, "--display-every must be >= 0 (got {})", o.display_every);
  DLSCALE_CHECK(o.synthetic_batches >= 1 && o.synthetic_batches <= kMaxSyntheticBatches,
                "--synthetic-batches must be in [1, {}] (got {})", kMaxSyntheticBatches,
                o.synthetic_batches);
  DLSCALE_CHECK(o.image_size >= 0 && o.image_size <= kMaxImageSize,
                "--image-size must be in [0, {}] (got {}; 0 = the model's default)", kMaxImageSize,
                o.image_size);
  DLSCALE_CHECK(o.num_classes >= 0 && o.num_classes <= kMaxClasses,
                "--classes must be in [0, {}] (got {}; 0 = the model's default)", kMaxClasses,
                o.num_classes);
  for (const auto& [flag, mb] : {std::pair{"--bucket-mb", o.bucket_mb},
                                 std::pair{"--first-bucket-mb", o.first_bucket_mb},
                                 std::pair{"--ps-partition-mb", o.ps_partition_mb}}) {
    DLSCALE_CHECK(mb <= kMaxMiB, "{} must be at most {:g} (got {})", flag, kMaxMiB, mb);
  }
  DLSCALE_CHECK(o.ps_shards <= launch::kMaxProcesses, "--ps-shards must be at most {} (got {})",
                launch::kMaxProcesses, o.ps_shards);
  DLSCALE_CHECK(o.max_staleness <= kMaxSteps, "--max-staleness must be at most {} (got {})",
                kMaxSteps, o.max_staleness);
  r.optimizer = parse_optimizer(o.optimizer);
  DLSCALE_CHECK(r.optimizer != OptimizerKind::kNesterov || o.momentum > 0,
                "--optimizer nesterov needs --momentum > 0 (got {})", o.momentum);
  check_device(o.device);
  data::check_data_options(o.data);
  check_recipe(o.recipe, o.data.spec != "synthetic");
  r.memory_format = parse_memory_format(o.memory_format);
  r.amp = parse_amp(o.amp);
  DLSCALE_CHECK(r.amp != AmpMode::kFp16 || torch::Device(o.device).is_cuda(),
                "--amp fp16 needs --device cuda (on CPU use --amp bf16)");
  check_strategy(r);

  const models::ModelOptions mo = models::resolve_options(spec, model_options(o));
  o.num_classes = mo.num_classes;
  o.image_size = mo.image_size;
  r.channels = spec.channels;
  r.measured_steps = o.steps - o.warmup;
  r.global_batch = o.batch * r.world_size;
  check_train_outputs(o);
  return r;
}

void apply_epochs(ResolvedTrainOptions& r, int64_t steps_per_epoch) {
  TrainOptions& o = r.options;
  if (o.recipe.epochs <= 0) return;
  DLSCALE_ASSERT(steps_per_epoch >= 1);
  o.steps = std::max<int64_t>(1, epochs_to_steps(o.recipe.epochs, steps_per_epoch));
  DLSCALE_CHECK(o.steps > o.warmup,
                "--epochs {:g} is {} steps of {} per epoch, not more than --warmup {}: train "
                "longer or lower --warmup",
                o.recipe.epochs, o.steps, steps_per_epoch, o.warmup);
  r.measured_steps = o.steps - o.warmup;
}

}  // namespace dlscale::train
