#include "train/train_checks.h"

#include "core/error.h"
#include "core/files.h"

namespace dlscale::train {

namespace {

// Sane caps on counts and sizes (docs/errors.md, "Limits"): beyond them a
// value is a typo, not an experiment.
// (A namespace of their own: recipe.cpp, in the same unity batch, has caps of
// its own by some of these names.)
namespace cap {
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
}  // namespace cap

void check_batch(const RunOptions& o) {
  DLSCALE_CHECK(o.global_batch >= 0 && o.global_batch <= cap::kMaxGlobalBatch,
                "--global-batch must be in [0, {}] (got {}; 0 = weak scaling)",
                cap::kMaxGlobalBatch, o.global_batch);
  DLSCALE_CHECK(o.accumulate >= 1 && o.accumulate <= cap::kMaxAccumulate,
                "--accumulate must be in [1, {}] (got {}; 1 = no accumulation)",
                cap::kMaxAccumulate, o.accumulate);
  // Strong scaling derives the batch (resolve_batch).
  DLSCALE_CHECK(o.global_batch > 0 || (o.batch >= 1 && o.batch <= cap::kMaxBatch),
                "--batch must be in [1, {}] (got {})", cap::kMaxBatch, o.batch);
}

void check_run(const RunOptions& o) {
  DLSCALE_CHECK(o.warmup >= 0, "--warmup must be >= 0 (got {})", o.warmup);
  DLSCALE_CHECK(o.steps <= cap::kMaxSteps, "--steps must be at most {} (got {})", cap::kMaxSteps,
                o.steps);
  DLSCALE_CHECK(o.steps > o.warmup,
                "--steps ({}) must be greater than --warmup ({}): steps include the warm-up and "
                "at least one step must be measured",
                o.steps, o.warmup);
  DLSCALE_CHECK(o.display_every >= 0, "--display-every must be >= 0 (got {})", o.display_every);
  DLSCALE_CHECK(o.synthetic_batches >= 1 && o.synthetic_batches <= cap::kMaxSyntheticBatches,
                "--synthetic-batches must be in [1, {}] (got {})", cap::kMaxSyntheticBatches,
                o.synthetic_batches);
  DLSCALE_CHECK(o.noise_every == RunOptions::kNoiseEveryAuto ||
                    (o.noise_every >= 0 && o.noise_every <= cap::kMaxSteps),
                "--noise-every must be in [0, {}] (got {}; 0 = never)", cap::kMaxSteps,
                o.noise_every);
  DLSCALE_CHECK(o.noise_final == 0 || (o.noise_final >= 2 && o.noise_final <= cap::kMaxSteps),
                "--noise-final must be 0 (none) or in [2, {}] batches: the estimate pairs them "
                "(got {})",
                cap::kMaxSteps, o.noise_final);
}

void check_optimizer(const OptimizerOptions& o) {
  DLSCALE_CHECK(o.lr > 0 && o.lr <= cap::kMaxRate, "--lr must be in (0, {:g}] (got {})",
                cap::kMaxRate, o.lr);
  DLSCALE_CHECK(o.momentum >= 0 && o.momentum < 1, "--momentum must be in [0, 1) (got {})",
                o.momentum);
  DLSCALE_CHECK(o.weight_decay >= 0 && o.weight_decay <= cap::kMaxRate,
                "--weight-decay must be in [0, {:g}] (got {})", cap::kMaxRate, o.weight_decay);
  DLSCALE_CHECK(o.clip_grad_norm >= 0 && o.clip_grad_norm <= 1e9,
                "--clip-grad-norm must be in [0, 1e9] (got {}; 0 = no clipping)", o.clip_grad_norm);
  DLSCALE_CHECK(o.kind != OptimizerKind::kNesterov || o.momentum > 0,
                "--optimizer nesterov needs --momentum > 0 (got {})", o.momentum);
}

/// The sizes the options give the model; whether they fit it is the zoo's
/// to say (models::resolve_options).
void check_model_sizes(const models::ModelOptions& o) {
  struct Size {
    const char* flag;
    int64_t value;
    int64_t cap;
  };
  for (const Size& size :
       {Size{"--image-size", o.image_size, cap::kMaxImageSize},
        Size{"--classes", o.num_classes, cap::kMaxClasses},
        Size{"--vocab", o.vocab, cap::kMaxVocab}, Size{"--seq-len", o.seq_len, cap::kMaxSeqLen},
        Size{"--hidden", o.hidden, cap::kMaxHidden}}) {
    DLSCALE_CHECK(size.value >= 0 && size.value <= size.cap,
                  "{} must be in [0, {}] (got {}; 0 = the model's default)", size.flag, size.cap,
                  size.value);
  }
}

void check_sync_caps(const dp::SyncOptions& o) {
  for (const auto& [flag, mb] :
       {std::pair{"--bucket-mb", o.bucket_mb}, std::pair{"--first-bucket-mb", o.first_bucket_mb},
        std::pair{"--ps-partition-mb", o.ps.partition_mb}}) {
    DLSCALE_CHECK(mb <= cap::kMaxMiB, "{} must be at most {:g} (got {})", flag, cap::kMaxMiB, mb);
  }
  DLSCALE_CHECK(o.ps.shards <= cap::kMaxShards, "--ps-shards must be at most {} (got {})",
                cap::kMaxShards, o.ps.shards);
  DLSCALE_CHECK(o.ps.max_staleness <= cap::kMaxSteps, "--max-staleness must be at most {} (got {})",
                cap::kMaxSteps, o.ps.max_staleness);
  dp::check_sync_options(o);
}

}  // namespace

void check_train_options(const TrainOptions& o) {
  check_sync_caps(o.sync);
  check_batch(o.run);
  check_run(o.run);
  check_optimizer(o.optimizer);
  check_model_sizes(o.model);
  DLSCALE_CHECK(o.compute.threads >= 0 && o.compute.threads <= cap::kMaxThreads,
                "--threads must be in [0, {}] (got {})", cap::kMaxThreads, o.compute.threads);
  data::check_data_options(o.data);
  check_recipe(o.recipe);
}

void resolve_batch(ResolvedTrainOptions& r) {
  RunOptions& o = r.options.run;
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
    DLSCALE_CHECK(o.batch <= cap::kMaxBatch,
                  "--global-batch {} over {} worker(s) is {} per worker, over the per-worker cap "
                  "of {} (use more workers or a smaller global batch)",
                  o.global_batch, r.world_size, o.batch, cap::kMaxBatch);
  }
  DLSCALE_CHECK(o.batch * r.world_size <= cap::kMaxGlobalBatch / o.accumulate,
                "--batch {} x {} workers x --accumulate {} is over the global batch cap of {}",
                o.batch, r.world_size, o.accumulate, cap::kMaxGlobalBatch);
  r.global_batch = o.batch * r.world_size * o.accumulate;
}

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

}  // namespace dlscale::train
