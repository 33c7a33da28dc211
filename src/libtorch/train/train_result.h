#pragma once
// What one training run measured, how it is summarized (docs/metrics.md),
// and its two renderings: console text and the self-describing JSON record.
#include <nlohmann/json.hpp>

#include <iterator>
#include <ostream>
#include <string>
#include <vector>

#include "core/stats.h"
#include "core/sysinfo.h"
#include "libtorch/data/data_source.h"
#include "libtorch/dp/gradient_sync.h"
#include "libtorch/models/model.h"
#include "train/convergence.h"
#include "train/train_options.h"

namespace dlscale::train {

/// Seconds spent in each phase of one step on one worker.
struct StepTimes {
  double data = 0;       ///< fetching the batch
  double forward = 0;    ///< forward pass and loss
  double backward = 0;   ///< backward pass (bucket allreduces overlap it)
  double comm = 0;       ///< exposed communication: waiting for gradients after backward
  double optimizer = 0;  ///< optimizer update
  double total = 0;      ///< whole step, start to end
};

/// Names of the StepTimes phases, in record order (for tables and JSON keys).
inline constexpr const char* kPhaseNames[] = {"data",     "forward",   "backward",
                                              "comm",     "optimizer", "total"};
inline constexpr size_t kNumPhases = std::size(kPhaseNames);
double phase_seconds(const StepTimes& t, size_t phase);

struct StepRecord {
  int64_t step = 0;  ///< 0-based
  StepTimes times;   ///< this rank's; after the run, rank 0 holds the max over ranks per phase
  double loss = 0;   ///< rank 0's loss on its shard
  bool measured = false;  ///< false during warm-up
  double comm_busy = 0;   ///< seconds the communication thread spent in collectives
  double lr = 0;          ///< the learning rate the step's update used
  int64_t items = 0;      ///< the task's items (images, tokens) in the global batch; 0 = uncounted
};

/// How gradients were exchanged (several workers, or a strategy with servers).
struct CommSummary {
  std::string backend;                ///< gloo | mpi | inproc
  std::string strategy;               ///< allreduce | tree | hierarchical | independent | ps
  std::string layout;                 ///< bucketed | flat | none
  std::string exchange;               ///< collectives | pushes | none (dp::SyncInfo)
  std::string wire_dtype;             ///< float32 | float16 | bfloat16 (--compress)
  int nodes = 0;                      ///< hierarchical: node groups
  std::vector<int64_t> bucket_bytes;  ///< wire bytes, in launch order
  int64_t bytes_per_step = 0;         ///< gradient bytes handed to collectives per step
  double busy_ms_p50 = 0;             ///< median time in collectives per step (rank 0)
  double algbw_gbps = 0;              ///< bytes_per_step / busy time, GB/s
  double busbw_gbps = 0;              ///< algbw × bus_factor (ring allreduce: 2(p−1)/p, traffic per link)
  double bus_factor = 0;              ///< the strategy's (dp::SyncInfo); 0 = ring allreduce's
  std::string formula;                ///< bytes each rank sends per step, as a formula
  std::vector<double> formula_bytes_sent;  ///< per rank, bytes per step by the formula
  std::vector<double> tcp_bytes_sent;      ///< per rank, bytes per step acknowledged on TCP sockets; -1 = unknown
  bool replicas_should_match = true;  ///< the strategy keeps replicas identical
  bool replicas_identical = true;     ///< the ranks' parameters were bit-identical after the run
};

/// Software facts of the run (besides SystemInfo).
struct RuntimeInfo {
  std::string torch_version;
  int compute_threads = 0;  ///< LibTorch intra-op threads in effect
  int blas_threads = -1;    ///< BLAS library threads in effect (-1: unknown)
  std::string blas_config;
  std::string device;
  std::string gpu;                         ///< the GPU's name; "" on CPU
  std::string phase_timing = "host-clock";  ///< or "cuda-events" (libtorch/compute/phase_clock.h)
  std::string data_source;
  int64_t amp_skipped_steps = 0;  ///< --amp fp16: steps skipped for inf/NaN gradients
  double loss_scale = 1.0;        ///< --amp fp16: the loss scale at the end
  // --clip-grad-norm: the global gradient norm before clipping, over the
  // steps that updated (rank 0's view; every rank computes the same).
  int64_t clip_steps = 0;     ///< steps whose norm was computed
  int64_t clipped_steps = 0;  ///< of those, steps whose norm was above the bound
  double grad_norm_last = 0;
  double grad_norm_max = 0;
};

/// What the run trained on and what its input pipeline did (docs/data.md).
struct DataSummary {
  std::string spec = "synthetic";  ///< --data as resolved (fashion-mnist → idx:DIR)
  std::string format = "synthetic";
  std::string location;
  int64_t samples = 0;          ///< training samples in the dataset (0: synthetic)
  int64_t steps_per_epoch = 0;  ///< global batches per epoch (0: synthetic)
  int64_t bytes = 0;            ///< bytes of the data files
  int64_t shards = 0;           ///< data files (shards) of the training split
  int64_t shards_opened = 0;    ///< rank 0's: all, or its own with --data-order streaming
  int64_t indexed_shards = 0;   ///< of those, opened from an index sidecar (the rest were scanned)
  std::string augment = "none";
  double stage_seconds = 0;     ///< --stage-dir copy, not counted in any step
  int64_t staged_bytes = 0;
  data::PipelineStats pipeline;  ///< rank 0's pipeline counters over the whole run
};

/// What one rank keeps for training between steps, in bytes (docs/metrics.md,
/// "Memory"): accounted from the tensors it holds, and the measured peak.
struct RankMemory {
  int64_t params = 0;
  int64_t grads = 0;
  int64_t optimizer = 0;  ///< optimizer state (momentum buffers, Adam's moments)
  int64_t peak_rss = -1;  ///< the process's peak resident set (VmHWM); -1 = unknown
  int64_t device_peak = -1;  ///< on a GPU, the CUDA caching allocator's peak; -1 = not on a GPU
  int64_t total() const { return params + grads + optimizer; }
};

struct TrainSummary {
  int world_size = 1;
  int64_t measured_steps = 0;
  double wall_seconds = 0;        ///< wall time of the measured steps
  double samples_per_sec = 0;     ///< measured steps × global batch / wall time
  int64_t measured_items = 0;  ///< items the measured steps' global batches held (0 = not counted)
  Summary step_rate;              ///< per-step samples/s: mean, uncertainty, jitter
  Summary step_time;              ///< per-step seconds: p50, p95
  StepTimes median_times;         ///< median per phase over measured steps (max over ranks)
  double first_loss = 0;
  double last_loss = 0;
};

struct TrainResult {
  ResolvedTrainOptions config;
  models::ModelFacts model;
  SystemInfo system;
  RuntimeInfo runtime;
  std::vector<std::string> argv;
  std::string started_at;   ///< UTC ISO-8601
  std::string finished_at;  ///< UTC ISO-8601
  std::vector<StepRecord> steps;
  TrainSummary summary;
  bool exchanged = false;                 ///< gradients moved: several workers, or servers
  CommSummary comm;                       ///< empty unless `exchanged`
  std::vector<std::string> strategy_header;  ///< the strategy's header lines (its layout)
  dp::StrategyReport strategy;            ///< its own record section and summary lines
  DataSummary data;
  ConvergenceSummary convergence;         ///< evaluations and time to accuracy
  std::vector<StepTimes> rank_median_times;  ///< per rank: median per phase
  std::vector<RankMemory> memory;            ///< per rank, at the end of the run
  nlohmann::json noise;  ///< with --noise-scale: libtorch/train/noise_scale.h's report (else null)
  nlohmann::json backward_profile;           ///< with --trace: libtorch/train/backward_profile.h (else null)
};

/// Items (the task's unit) per sample of the measured steps: the mean the
/// batches held where the task counts them, else the unit's per sample.
double items_per_sample(const TrainResult& r);
/// Items per second: samples/s × items_per_sample(r).
double items_per_sec(const TrainResult& r);

/// Computes the summary from `steps` (measured steps only) and the wall time.
TrainSummary summarize_steps(const std::vector<StepRecord>& steps, int64_t global_batch,
                             double wall_seconds);

/// Median of each phase over the measured steps of `steps`.
StepTimes median_phase_times(const std::vector<StepRecord>& steps);

/// Fills busy time and bandwidths of `comm` from rank 0's measured steps.
void summarize_comm(const std::vector<StepRecord>& steps, int world_size, CommSummary& comm);

/// The self-describing record (schema "dlscale.train/1"): inputs, model,
/// environment, summary and every step's times.
nlohmann::json to_json(const TrainResult& result);

/// Console rendering: header before training, a line per displayed step, summary after.
void print_header(std::ostream& out, const TrainResult& result);
void print_step_line(std::ostream& out, const StepRecord& step, int64_t total_steps,
                     int64_t global_batch);
void print_summary(std::ostream& out, const TrainResult& result);

}  // namespace dlscale::train
