#pragma once
// The training benchmark on one worker of a job of any size: builds the model,
// optimizer and data from validated options, runs the steps and measures each
// phase of every step. Gradients are combined by the strategy the options
// name (libtorch/dp/gradient_sync.h); with several workers rank 0 reports for the job.
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "libtorch/comm/communicator.h"
#include "libtorch/compute/torch_compat.h"
#include "libtorch/data/data_source.h"
#include "libtorch/data/data_spec.h"
#include "libtorch/models/model.h"
#include "train/recipe.h"
#include "libtorch/train/resolve.h"
#include "libtorch/train/train_result.h"


namespace dlscale {
class PhaseClock;
}

namespace dlscale::dp {
class GradientSync;
class Strategy;
struct StrategyReport;
struct SyncStepStats;
}

namespace dlscale::train {

struct CheckpointMeta;
class Evaluator;
class LossScaler;
class Mllog;
class Tracer;
class BackwardProfiler;
class NoiseProbe;
class FinalNoise;

/// Receives progress from Trainer::run (on the calling thread).
class TrainObserver {
 public:
  virtual ~TrainObserver() = default;
  virtual void on_start(const TrainResult& result) {}
  /// A phase ("data", "forward", "backward", "comm", "optimizer") of `step`
  /// begins; "eval" is reported before each evaluation batch after `step`.
  virtual void on_phase(int64_t step, const char* phase) {}
  virtual void on_step(const StepRecord& step, const TrainResult& result) {}
  /// An evaluation finished (its record is also result.convergence.evals.back()).
  virtual void on_eval(const EvalRecord& eval, const TrainResult& result) {}
  /// --noise-final: `done` of `total` batches measured at the final weights,
  /// `seconds` since the first.
  virtual void on_final_noise(int64_t done, int64_t total, double seconds) {}
  virtual void on_finish(const TrainResult& result) {}
};

/// Prints the header, a step line every `display_every` steps (plus the first
/// and last), and the summary to `out`.
class ConsoleObserver : public TrainObserver {
 public:
  explicit ConsoleObserver(std::ostream& out) : out_(out) {}
  void on_start(const TrainResult& result) override;
  void on_step(const StepRecord& step, const TrainResult& result) override;
  void on_eval(const EvalRecord& eval, const TrainResult& result) override;
  void on_final_noise(int64_t done, int64_t total, double seconds) override;
  void on_finish(const TrainResult& result) override;

 private:
  std::ostream& out_;
  double start_ = 0;  ///< when on_start ran
  bool quiet_ = false;  ///< --display-every 0
};

/// Where this worker sits in the job.
struct WorkerContext {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  comm::Communicator* comm = nullptr;  ///< required when world_size > 1; not owned
  /// Ranks with the same name share a node (hierarchical strategy): the host,
  /// or the launcher's node index when several "nodes" share one host.
  std::string node_name;
  /// The run's strategy, arranged for this rank (libtorch/dp/strategy.h); not owned.
  /// Null: the trainer makes and arranges its own over `comm`.
  dp::Strategy* strategy = nullptr;
};

class Trainer {
 public:
  /// Opens the data (which shapes the model), builds the model, optimizer
  /// and strategy from options resolved once (resolve_train_options), and
  /// with several workers checks that every worker got the same
  /// configuration and copies rank 0's weights to all. `argv` is recorded
  /// in the result as given.
  Trainer(const ResolvedTrainOptions& config, const WorkerContext& worker,
          std::vector<std::string> argv = {});
  /// Resolves `options` for the worker's job first (throws dlscale::Error on
  /// bad input).
  explicit Trainer(const TrainOptions& options, const WorkerContext& worker = {},
                   std::vector<std::string> argv = {});
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  /// Runs every step, reporting to `observer`; returns the full result. On
  /// rank 0, writes the JSON record, trace and weights when asked.
  TrainResult run(TrainObserver& observer);

  models::Model& model() { return *model_; }
  const ResolvedTrainOptions& config() const { return result_.config; }

 private:
  void setup_compute();
  data::SourceOptions setup_data(const data::OpenedData& opened);
  void build_model();
  void join_workers();
  void setup_sync();
  void record_runtime();
  StepRecord run_step(int64_t step, TrainObserver& observer);
  /// The task's items (images, tokens) in the global batch whose slice is `batch`.
  int64_t step_items(const data::Batch& batch) const;
  /// Autocast to the --amp type for the scope of the result; none without --amp.
  std::optional<compat::AutocastScope> autocast() const;
  /// Forward pass and loss of `batch` (under autocast with --amp).
  torch::Tensor forward_loss(const data::Batch& batch);
  /// Micro-batch `micro_batch` of `micro_batches`' backward pass (--accumulate).
  void backward(const torch::Tensor& loss, int64_t micro_batch, int64_t micro_batches,
                bool measured);
  /// That pass's backward, through the strategy or past it.
  void backward_pass(const torch::Tensor& loss, int64_t micro_batch, int64_t micro_batches,
                     bool measured);
  /// The step's spans from its phase clock's offsets after `start`.
  void trace_step(int64_t step, double start, const std::vector<double>& offsets, bool exchanges,
                  const dp::SyncStepStats& comm);
  void broadcast_buffers();
  void record_data_info(const data::OpenedData& opened);
  void gather_rank_times();
  void gather_comm_facts(double tcp_bytes, int64_t tcp_steps);
  /// This rank's parameters, gradients and optimizer state, as held now.
  RankMemory account_memory() const;
  /// The strategy's bytes per bucket and per step, into result_.comm.
  void record_bucket_bytes();
  /// --noise-scale: the step's averaged gradient norm into the estimate.
  void measure_noise(int64_t step);
  /// --noise-final N: N more steps after the last, at the final weights and
  /// without updating them, into final_noise_report_; the model's buffers
  /// (batch norm's statistics) are put back as they were.
  void measure_final_noise(TrainObserver& observer);
  /// --noise-scale under Adam: P^2 per parameter from the optimizer's state
  /// (put together over the workers where the strategy shards it), or none.
  std::vector<torch::Tensor> preconditioner_squares();
  /// The averaged gradient's sum of P^2 g^2 (NaN without P^2).
  double averaged_weighted_sq();
  /// The sum over the workers of each one's `value` (a collective, exact:
  /// dp::sum_doubles_over_workers).
  double sum_over_workers(double value);
  /// --clip-grad-norm: clips the gradients the strategy applies, counted.
  void clip_gradients();
  /// Every rank's account and peak resident set, into result_.memory.
  void gather_memory();
  void write_outputs();
  /// Every rank gathers the parameters (ZeRO stage 3 shards them); rank 0
  /// saves them to `path` (torch::save of the parameter list).
  void save_parameters(const std::string& path);
  void record_sync_info();
  void record_strategy_report(dp::StrategyReport report);
  // Convergence (libtorch/train/trainer_convergence.cpp).
  void setup_convergence(const data::SourceOptions& source);
  void log_run_start();
  /// The MLPerf submission_* keys (docs/mllog.md).
  void log_submission();
  bool after_step(int64_t step, TrainObserver& observer);
  bool evaluate(int64_t done, TrainObserver& observer);
  void finish_convergence();
  void save_checkpoint(int64_t next_step);
  void resume_from(const std::string& path);
  void check_lr_curve(const CheckpointMeta& meta, const std::string& path) const;
  CheckpointMeta checkpoint_meta(int64_t next_step) const;
  double run_seconds() const;

  TrainResult result_;
  WorkerContext worker_;
  torch::Device device_;
  models::ModelSpec spec_;                       ///< the model's (copied: the registry may grow)
  std::shared_ptr<const models::Task> task_;     ///< what it reads and learns
  std::shared_ptr<models::Model> model_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  std::unique_ptr<data::DataSource> data_;
  std::unique_ptr<dp::Strategy> own_strategy_;  ///< when the context gave none
  std::unique_ptr<dp::GradientSync> sync_;
  std::unique_ptr<Tracer> tracer_;
  std::unique_ptr<BackwardProfiler> profiler_;  ///< with --trace: when each gradient is ready
  std::unique_ptr<NoiseProbe> noise_;           ///< with --noise-every N >= 1 (resolved)
  bool noise_now_ = false;                      ///< this step is one noise_ measures
  /// While --noise-final measures: run_step() takes its gradient, applies nothing.
  std::unique_ptr<FinalNoise> final_noise_;
  nlohmann::json final_noise_report_;  ///< results.noise.final (null without --noise-final)
  /// Zero under Adam: this step's P^2 of this rank's pieces (own_parameters()).
  std::vector<torch::Tensor> piece_squares_;
  bool sharded_squares_ = false;          ///< this step's P^2 came from the workers' shards
  int64_t updates_ = 0;                   ///< updates applied by this run
  std::unique_ptr<Evaluator> evaluator_;  ///< null when the run does not evaluate
  std::unique_ptr<Mllog> mllog_;          ///< rank 0 with --mllog only
  std::unique_ptr<PhaseClock> phase_clock_;  ///< host clock, or CUDA events on a GPU
  std::unique_ptr<LossScaler> scaler_;       ///< --amp fp16's loss scaling (else a no-op)
  LrSchedule schedule_;
  double init_start_ = 0;        ///< when the constructor began (MLPerf init_start)
  double run_start_ = 0;         ///< when run() began (MLPerf run_start)
  double prior_run_seconds_ = 0; ///< run time of the runs a checkpoint continues
  double paused_seconds_ = 0;    ///< evaluation and checkpoint time inside the measurement
  bool measuring_ = false;
  int64_t start_step_ = 0;       ///< > 0 when resumed
  int64_t steps_per_epoch_ = 0;  ///< 0 for synthetic data
};

}  // namespace dlscale::train
