#pragma once
// Everything `dlscale train` can be asked, nested by concern: the model,
// the run's shape, the optimizer and recipe, the data, the strategy, the
// compute and the outputs. Each struct describes its options once, in a
// table (core/option_table.h) that gives the CLI flag and help, the record
// key and whether ranks must agree on it; enums are parsed at the CLI edge.
// resolve_train_options() (libtorch/train/resolve.h) validates everything once,
// before any work. The
// launch flags (workers, nodes, backend, timeout) belong to the launch
// layer (launch/launch_options.h).
#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/enum_names.h"
#include "core/option_table.h"
#include "data/data_options.h"
#include "dp/sync_options.h"
#include "models/model_options.h"
#include "train/amp_mode.h"
#include "train/recipe.h"

namespace dlscale::train {

enum class OptimizerKind { kSgd, kMomentum, kNesterov, kAdam, kLars };
const EnumNames<OptimizerKind, 5>& enum_names(OptimizerKind);
std::string to_string(OptimizerKind kind);

/// Layout of 4-D activations and weights. oneDNN's CPU convolutions run
/// faster on channels-last (NHWC) tensors; see docs/metrics.md.
enum class MemoryFormat { kChannelsLast, kContiguous };
const EnumNames<MemoryFormat, 2>& enum_names(MemoryFormat);
std::string to_string(MemoryFormat format);

/// How much one run trains and how it reports.
struct RunOptions {
  int64_t batch = 32;              ///< samples per step per worker (weak scaling)
  int64_t global_batch = 0;        ///< > 0: strong scaling, per-worker batch = global / workers
  int64_t steps = 20;              ///< total steps, including the warm-up steps
  int64_t warmup = 3;              ///< first steps excluded from the measurement
  uint64_t seed = 42;              ///< model initialization, data order and augmentation
  int64_t display_every = 10;      ///< print a step line every this many steps; 0 = never
  int64_t synthetic_batches = 1;   ///< distinct synthetic batches cycled through
  int64_t accumulate = 1;          ///< micro-batches per step, gradients summed locally
  bool noise_scale = false;        ///< the noise scale must be measured (train/noise_estimator.h)
  /// Steps between noise-scale measurements: 0 = none; kNoiseEveryAuto
  /// until resolved (every step with --noise-scale, else kNoiseEveryDefault
  /// where the run can measure it, none where it cannot).
  int64_t noise_every = kNoiseEveryAuto;
  /// Batches after the last step over which the noise scale is measured at
  /// the final weights, without updating (--noise-final); 0 = none.
  int64_t noise_final = 0;
  static constexpr int64_t kNoiseEveryAuto = -1;
  static constexpr int64_t kNoiseEveryDefault = 10;

  template <typename Self, typename Visitor>
  static void table(Self& s, Visitor&& v) {
    v(Option{"--batch,-b", "Samples per step per worker", record::input::kBatch}.agreed(), s.batch);
    v(Option{"--global-batch",
             "Strong scaling: samples per step over all workers, split evenly (must divide by the worker "
             "count); 0 = weak scaling with --batch per worker",
             nullptr},
      s.global_batch);
    v(Option{"--steps", "Total steps including warm-up; measured steps = steps - warmup", "steps"}.agreed(),
      s.steps);
    v(Option{"--warmup", "Warm-up steps excluded from the measurement", "warmup"}.agreed(), s.warmup);
    v(Option{"--seed",
             "Seed of model initialization, synthetic data, sample order and augmentation",
             record::input::kSeed}
          .agreed(),
      s.seed);
    v(Option{"--display-every", "Print a step line every N steps (and the first and last); 0 = none",
             "display_every"},
      s.display_every);
    v(Option{"--synthetic-batches", "Distinct synthetic batches generated once and cycled through",
             "synthetic_batches"},
      s.synthetic_batches);
    v(Option{"--accumulate",
             "Gradient accumulation: K micro-batches of --batch per step on each worker, their "
             "gradients summed locally and exchanged once (global batch = workers x batch x K)",
             record::input::kAccumulate}
          .agreed(),
      s.accumulate);
    v(Option{"--noise-scale",
             "Require the gradient noise scale B_simple = tr(Sigma)/|G|^2, from each worker's and "
             "the averaged gradient's squared norms, and measure it on every step unless "
             "--noise-every says otherwise; a run that cannot measure it is refused (it needs "
             "several workers whose strategy averages on the workers, or --accumulate 2 or more "
             "on one); docs/convergence.md",
             "noise_scale"}
          .agreed(),
      s.noise_scale);
    v(Option{"--noise-every",
             "Measure the gradient noise scale on every Nth step (0 = never). Default: every "
             "step with --noise-scale; otherwise every 10th where the run can measure it, so "
             "every run of several averaging workers records it (a measured step reads the "
             "gradients twice more: under 1% of the run at every 10th, bench/README.md)",
             "noise_every"}
          .agreed()
          .no_default(),
      s.noise_every);
    v(Option{"--noise-final",
             "After the last step, measure the gradient noise scale at the final weights over N "
             "more global batches without updating them (results.noise.final; 0 = none, else "
             "at least 2): every pair of the N averaged gradients counts, so it is far less "
             "noisy than the moving average over training. Needs the averaged gradient on "
             "every worker (not ps or zero); docs/convergence.md",
             "noise_final"}
          .agreed(),
      s.noise_final);
  }
};

struct OptimizerOptions {
  OptimizerKind kind = OptimizerKind::kSgd;
  double lr = 0.01;           ///< learning rate
  double momentum = 0.9;      ///< used by momentum, nesterov and lars
  double weight_decay = 0.0;  ///< L2 penalty
  double clip_grad_norm = 0;  ///< the gradients' global L2 norm is at most this; 0 = no clipping

  template <typename Self, typename Visitor>
  static void table(Self& s, Visitor&& v) {
    v(Option{"--optimizer", "sgd | momentum | nesterov | adam | lars (docs/convergence.md)", "optimizer"}
          .agreed(),
      s.kind);
    v(Option{"--lr", "Learning rate", "lr"}.agreed(), s.lr);
    v(Option{"--momentum", "Momentum for --optimizer momentum|nesterov", "momentum"}.agreed(), s.momentum);
    v(Option{"--weight-decay", "L2 weight decay", "weight_decay"}.agreed(), s.weight_decay);
    v(Option{"--clip-grad-norm",
             "Scale the gradients so that their global L2 norm (over every parameter, after the "
             "workers' average) is at most this, as torch.nn.utils.clip_grad_norm_; 0 = no clipping",
             "clip_grad_norm"}
          .agreed(),
      s.clip_grad_norm);
  }
};

/// Where and how a worker computes.
struct ComputeOptions {
  int threads = 0;             ///< intra-op threads per worker; 0 = cores / local workers (>= 1)
  std::string device = "cpu";  ///< "cpu", "cuda" (a GPU per local rank) or "cuda:N"
  bool share_gpus = false;     ///< let several local workers use one GPU (docs/gpu.md)
  AmpMode amp = AmpMode::kNone;  ///< autocast of the forward pass (libtorch/train/amp.h)
  MemoryFormat memory_format = MemoryFormat::kChannelsLast;
  bool keep_freed_memory = true;  ///< tune malloc to reuse freed activations (core/memory.h)
  bool deterministic = false;     ///< deterministic kernels, no autotuning (libtorch/compute/devices.h)

  template <typename Self, typename Visitor>
  static void table(Self& s, Visitor&& v) {
    v(Option{"--threads,-t,--threads-per-worker",
             "Intra-op compute threads per worker (LibTorch and BLAS); 0 = cores / local workers, "
             "at least 1",
             record::input::kThreads},
      s.threads);
    v(Option{"--device",
             "cpu | cuda (local worker r gets GPU r mod GPUs) | cuda:N (needs a CUDA LibTorch build; "
             "docs/gpu.md)",
             "device"},
      s.device);
    v(Option{"--share-gpus",
             "--device cuda: let several local workers use one GPU when there are fewer GPUs than workers "
             "(Gloo stages through host memory; NCCL cannot)",
             "share_gpus"},
      s.share_gpus);
    v(Option{"--amp",
             "none | bf16 | fp16: mixed precision (autocast of the forward pass); fp16 adds dynamic loss "
             "scaling and needs --device cuda (docs/gpu.md)",
             "amp"}
          .agreed(),
      s.amp);
    v(Option{"--memory-format",
             "channels-last | contiguous: layout of images and conv weights (channels-last is faster with "
             "oneDNN on CPU)",
             "memory_format"}
          .agreed(),
      s.memory_format);
    v(Option{"--deterministic",
             "Compute with deterministic algorithms: on a GPU, cuDNN's deterministic convolutions instead of "
             "the fastest found by autotuning, so two runs compute alike (slower; docs/gpu.md)",
             "deterministic"}
          .agreed(),
      s.deterministic);
    v(Option{"!--no-malloc-tuning",
             "Leave glibc malloc at its defaults (by default dlscale keeps freed memory for reuse instead of "
             "unmapping it every step)",
             "keep_freed_memory"},
      s.keep_freed_memory);
  }
};

/// What a run writes besides its console output.
struct OutputOptions {
  std::string json_path;     ///< result record file; "" = none
  std::string save_weights;  ///< rank 0 saves the final parameters here (torch::save); "" = no
  std::string save_initial_weights;  ///< rank 0 saves the parameters before the first step here
  std::string trace_path;    ///< Chrome-trace JSON of every rank's phases and buckets

  template <typename Self, typename Visitor>
  static void table(Self& s, Visitor&& v) {
    v(Option{"--json", "Write the self-describing JSON result record here (atomically)", "json"}.no_default(),
      s.json_path);
    v(Option{"--save-weights", "Rank 0 saves the final parameters here (torch::save of the parameter list)",
             "save_weights"}
          .no_default(),
      s.save_weights);
    v(Option{"--save-initial-weights",
             "Rank 0 saves the parameters before the first step here, as --save-weights does "
             "(after --resume: the checkpoint's)",
             "save_initial_weights"}
          .no_default(),
      s.save_initial_weights);
    v(Option{"--trace",
             "Write a Chrome-trace JSON (chrome://tracing, Perfetto) of every rank's phases and bucket "
             "collectives",
             "trace"}
          .no_default(),
      s.trace_path);
  }
};

struct TrainOptions {
  models::ModelOptions model;
  RunOptions run;
  OptimizerOptions optimizer;
  RecipeOptions recipe;    ///< epochs, evaluation, schedule, LARS, checkpoints (docs/convergence.md)
  data::DataOptions data;  ///< --data and the input pipeline (docs/data.md)
  dp::SyncOptions sync;    ///< the strategy (docs/strategies.md)
  ComputeOptions compute;
  OutputOptions output;
};

/// Options after validation: defaults filled in, and what follows from them.
struct ResolvedTrainOptions {
  TrainOptions options;        ///< every 0/"" default replaced by its value
  int64_t channels = 0;  ///< a dataset's images are decoded to (Task::dataset_channels; 0: none)
  int64_t measured_steps = 0;
  int64_t global_batch = 0;  ///< samples per step over all workers (micro-batches included)
  /// Samples per micro-batch over all workers: global_batch / --accumulate.
  int64_t micro_global_batch() const { return global_batch / options.run.accumulate; }
  int world_size = 1;          ///< workers
  int local_world_size = 1;    ///< workers on this node
  bool strong_scaling = false;
  /// The launch's --timeout: what links without a communicator wait.
  std::chrono::milliseconds timeout{60000};
  /// The launch layer's part of the record's inputs (workers, backend, cluster…).
  nlohmann::json launch_inputs = nlohmann::json::object();
};

}  // namespace dlscale::train
