#include "libtorch/train/trainer.h"

#include <algorithm>
#include <optional>
#include <sstream>

#include "libtorch/comm/agreement.h"
#include "libtorch/compute/devices.h"
#include "libtorch/compute/phase_clock.h"
#include "libtorch/compute/threads.h"
#include "libtorch/compute/torch_compat.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/files.h"
#include "core/memory.h"
#include "core/tcp_counters.h"
#include "core/text.h"
#include "libtorch/data/data_spec.h"
#include "libtorch/dp/gradient_sync.h"
#include "libtorch/dp/strategy.h"
#include "libtorch/train/accumulate.h"
#include "libtorch/train/amp.h"
#include "libtorch/train/backward_profile.h"
#include "libtorch/train/evaluator.h"
#include "libtorch/train/mllog.h"
#include "libtorch/train/noise_scale.h"
#include "libtorch/train/optimizer.h"
#include "libtorch/train/trace.h"

namespace dlscale::train {

void ConsoleObserver::on_start(const TrainResult& result) {
  print_header(out_, result);
  start_ = now_seconds();
  quiet_ = result.config.options.run.display_every == 0;
}

void ConsoleObserver::on_step(const StepRecord& step, const TrainResult& result) {
  const RunOptions& o = result.config.options.run;
  if (o.display_every == 0) return;
  const int64_t first_step = result.convergence.resumed_from_step;  // 0 unless resumed
  const bool first = step.step == first_step;
  const bool last = step.step + 1 == o.steps;
  if (!first && !last && (step.step + 1) % o.display_every != 0) return;
  if (result.convergence.enabled && result.data.steps_per_epoch > 0) {
    // Evaluations included: the ETA is the run's own pace so far.
    const double per_step =
        (now_seconds() - start_) / static_cast<double>(step.step + 1 - first_step);
    print_progress_line(out_, step.step, o.steps, result.data.steps_per_epoch, step.loss, step.lr,
                        result.convergence, per_step);
  } else {
    print_step_line(out_, step, o.steps, result.config.global_batch);
  }
}

void ConsoleObserver::on_eval(const EvalRecord& eval, const TrainResult& result) {
  print_eval_line(out_, eval, result.convergence.metrics);
}

void ConsoleObserver::on_final_noise(int64_t done, int64_t total, double seconds) {
  // The first and the last, and about every tenth of a long measurement.
  const int64_t every = total >= 20 ? total / 10 : total;
  if (quiet_ || (done != 1 && done != total && done % every != 0)) return;
  out_ << fmt::format("noise scale at the final weights: {}/{} batches ({:.1f} s)\n", done, total,
                      seconds)
       << std::flush;
}

void ConsoleObserver::on_finish(const TrainResult& result) { print_summary(out_, result); }

namespace {

/// Every worker's part of the shards (--data-order streaming: each opened
/// only its own), told over the communicator; none without one.
ExchangeParts exchange_over(comm::Communicator* comm) {
  if (comm == nullptr) return {};
  return [comm](const data::DatasetInfo& mine) {
    const std::vector<std::string> all = comm::allgather_strings(*comm, data::part_text(mine));
    std::vector<data::DatasetInfo> parts;
    for (size_t r = 0; r < all.size(); ++r) parts.push_back(data::from_part_text(all[r], r));
    return parts;
  };
}

}  // namespace

Trainer::Trainer(const TrainOptions& options, const WorkerContext& worker, std::vector<std::string> argv)
    : Trainer(resolve_train_options(options, std::max(1, worker.world_size), worker.local_world_size),
              worker, std::move(argv)) {}

Trainer::Trainer(const ResolvedTrainOptions& config, const WorkerContext& worker,
                 std::vector<std::string> argv)
    : worker_(worker), device_(torch::kCPU), init_start_(now_seconds()) {
  DLSCALE_ASSERT(worker.world_size == 1 || worker.comm != nullptr);
  result_.config = config;
  result_.argv = std::move(argv);
  // The data is opened first: it may shape the model (its task says how).
  const data::OpenedData opened = open_training_data(result_.config, worker.rank, exchange_over(worker.comm));
  spec_ = models::model_spec(result_.config.options.model);
  task_ = spec_.task;
  setup_compute();
  const data::SourceOptions source = setup_data(opened);
  build_model();
  if (worker.world_size > 1) join_workers();
  setup_sync();
  optimizer_ = make_optimizer(result_.config.options.optimizer, model_->parameters(), result_.config.options.recipe);
  setup_convergence(source);
  const TrainOptions& o = result_.config.options;
  if (!o.recipe.resume_path.empty()) resume_from(o.recipe.resume_path);
  if (!o.output.trace_path.empty()) {
    tracer_ = std::make_unique<Tracer>(worker.rank, now_seconds());
    profiler_ = std::make_unique<BackwardProfiler>(model_->parameters());
  }
  if (o.run.noise_every > 0) {
    noise_ = std::make_unique<NoiseProbe>(model_->parameters(), worker.world_size, o.run.accumulate,
                                          o.run.batch, o.run.noise_every);
  }
  const size_t marks = step_marks(o.run.accumulate);  // 6 without --accumulate
  if (device_.is_cuda()) phase_clock_ = make_cuda_phase_clock(device_.index(), marks);
  if (!phase_clock_) phase_clock_ = make_host_phase_clock(marks);
  scaler_ = std::make_unique<LossScaler>(o.compute.amp == AmpMode::kFp16);
  record_runtime();
}

void Trainer::setup_compute() {
  const ComputeOptions& o = result_.config.options.compute;
  device_ = worker_device(o.device, worker_.local_rank, worker_.local_world_size, o.share_gpus);
  set_compute_threads(o.threads);  // process-wide (see libtorch/compute/threads.h)
  choose_algorithms(device_, o.deterministic);
  if (o.keep_freed_memory) keep_freed_memory();
}

data::SourceOptions Trainer::setup_data(const data::OpenedData& opened) {
  const ResolvedTrainOptions& c = result_.config;
  const TrainOptions& o = c.options;
  data::SourceOptions so;
  so.global_batch = c.micro_global_batch();  // a step reads --accumulate of them
  so.rank = worker_.rank;
  so.world_size = c.world_size;
  so.synthetic_batches = o.run.synthetic_batches * o.run.accumulate;  // counted in steps
  so.seed = o.run.seed + 1;  // data stream independent of the initialization stream
  so.device = device_;
  task_->shape_source(spec_, o.model, o.compute.memory_format == MemoryFormat::kChannelsLast, so);
  so.synthetic = task_->synthetic_stream(spec_, o.model, so.seed, so.global_batch);
  data_ = data::make_data_source(opened, o.data, so);
  const std::string mismatch = models::feed_mismatch(spec_, o.model, data_->provides(), o.data.spec);
  DLSCALE_CHECK(mismatch.empty(), "{}", mismatch);
  steps_per_epoch_ = data_->steps_per_epoch() / o.run.accumulate;  // micro-batches to steps
  DLSCALE_CHECK(
      data_->steps_per_epoch() == 0 || steps_per_epoch_ >= 1,
      "--accumulate {}: an epoch of this data holds only {} micro-batch(es) of {} samples",
      o.run.accumulate, data_->steps_per_epoch(), so.global_batch);
  // Synthetic batches repeat after --synthetic-batches steps: a repeated
  // batch's gradient is no new sample of the noise.
  DLSCALE_CHECK(opened.dataset || o.run.noise_final <= o.run.synthetic_batches,
                "--noise-final {} needs as many distinct batches, and synthetic data cycles "
                "through --synthetic-batches {}: give at most that many, or more synthetic batches",
                o.run.noise_final, o.run.synthetic_batches);
  apply_epochs(result_.config, steps_per_epoch_);  // --epochs: the steps are known now
  record_data_info(opened);
  return so;
}

void Trainer::build_model() {
  const TrainOptions& o = result_.config.options;
  torch::manual_seed(o.run.seed + static_cast<uint64_t>(worker_.rank));  // dropout masks differ per rank
  model_ = spec_.make(o.model);
  result_.model = models::measure_model(spec_, o.model, *model_);
  model_->to(device_);
  model_->use_memory_format(o.compute.memory_format == MemoryFormat::kChannelsLast);
  model_->train();
}

/// Every worker checks it got the same configuration, then takes rank 0's
/// weights (and batch-norm statistics).
void Trainer::join_workers() {
  comm::Communicator& comm = *worker_.comm;
  comm::check_same_config(comm, agreed_inputs(result_.config));
  torch::NoGradGuard no_grad;
  for (auto& p : model_->parameters()) {
    // Broadcast moves bytes: a contiguous staging copy keeps any layout right.
    torch::Tensor staging = p.contiguous();
    comm.broadcast(staging, 0);
    p.copy_(staging);
  }
  if (result_.config.options.sync.sync_buffers != dp::SyncBuffers::kNone) broadcast_buffers();
}

void Trainer::setup_sync() {
  const ResolvedTrainOptions& c = result_.config;
  dp::Strategy* strategy = worker_.strategy;
  if (strategy == nullptr) {
    own_strategy_ = dp::make_strategy(c.options.sync);
    DLSCALE_ASSERT(!own_strategy_->arrange(worker_.comm).serves);
    strategy = own_strategy_.get();
  }
  dp::SyncContext sync_context;
  sync_context.comm = worker_.comm;
  sync_context.node_name = worker_.node_name;
  sync_context.make_optimizer = optimizer_factory(c);
  sync_context.steps = c.options.run.steps;
  sync_context.warmup = c.options.run.warmup;
  sync_context.noise_every = c.options.run.noise_every;
  sync_context.timeout = c.timeout;
  sync_context.units = models::unit_parameters(*model_);
  sync_context.sparse = models::sparse_gradient_parameters(*model_);
  sync_context.observe_units = [this](models::UnitObserver* o) { model_->set_unit_observer(o); };
  sync_ = strategy->make_sync(model_->parameters(), sync_context);
  record_sync_info();
}

void Trainer::record_runtime() {
  result_.system = collect_system_info();  // after LibTorch loaded its BLAS
  result_.runtime.torch_version = compat::torch_version();
  result_.runtime.compute_threads = compute_threads();
  result_.runtime.blas_threads = blas_threads();
  result_.runtime.blas_config = blas_config();
  result_.runtime.device = device_.str();
  if (device_.is_cuda()) result_.runtime.gpu = cuda_device_name(device_.index());
  result_.runtime.phase_timing = phase_clock_->method();
  result_.runtime.data_source = data_->name();
}

Trainer::~Trainer() = default;

void Trainer::record_data_info(const data::OpenedData& opened) {
  DataSummary& d = result_.data;
  d.spec = opened.spec.text();
  d.augment = data::resolve_augment(result_.config.options.data, opened);
  if (!opened.dataset) {  // synthetic: an epoch is a pass over its pool
    d.steps_per_epoch = data_->steps_per_epoch();
    return;
  }
  const data::DatasetInfo& info = opened.dataset->info();
  d.format = info.format;
  d.location = info.location;
  const bool parts = opened.pick.of > 1;  // this worker opened only its own shards
  d.samples = parts ? opened.parts.samples : info.size;
  d.steps_per_epoch = data_->steps_per_epoch();
  d.bytes = parts ? opened.parts.bytes : info.bytes;
  d.shards = info.shards;
  d.shards_opened = static_cast<int64_t>(info.shard_starts.size());
  d.indexed_shards = info.indexed_shards;
  d.stage_seconds = opened.stage_seconds;
  d.staged_bytes = opened.staged_bytes;
}

void Trainer::record_sync_info() {
  const dp::SyncInfo& info = sync_->info();
  result_.strategy_header = info.header;
  result_.exchanged = worker_.world_size > 1 || info.exchanges_alone;
  if (!result_.exchanged) return;
  result_.comm.backend = worker_.comm != nullptr ? worker_.comm->backend() : "inproc";
  result_.comm.strategy = info.strategy;
  result_.comm.layout = info.layout;
  result_.comm.exchange = info.exchange;
  result_.comm.wire_dtype = info.wire_dtype;
  result_.comm.formula = info.formula;
  result_.comm.bus_factor = info.bus_factor;
  result_.comm.nodes = info.nodes;
  result_.comm.replicas_should_match = info.keeps_replicas_identical;
  record_bucket_bytes();
}

void Trainer::record_bucket_bytes() {
  result_.comm.bucket_bytes = sync_->info().bucket_bytes;
  result_.comm.bytes_per_step = 0;
  for (int64_t b : result_.comm.bucket_bytes) result_.comm.bytes_per_step += b;
}

void Trainer::broadcast_buffers() {
  torch::NoGradGuard no_grad;
  for (auto& b : model_->buffers()) {
    torch::Tensor staging = b.contiguous();
    worker_.comm->broadcast(staging, 0);
    b.copy_(staging);
  }
}

void Trainer::record_strategy_report(dp::StrategyReport report) {
  if (tracer_) {
    for (const dp::TraceSpan& span : report.spans) tracer_->add(span.name, span.track, span.start, span.end);
  }
  result_.strategy = std::move(report);
}

void Trainer::save_parameters(const std::string& path) {
  sync_->need_parameters();
  if (worker_.rank != 0) return;
  std::ostringstream out;
  torch::save(model_->parameters(), out);
  write_file_atomic(path, out.str());
}

void Trainer::write_outputs() {
  const TrainOptions& o = result_.config.options;
  std::vector<nlohmann::json> traces;
  if (tracer_) {
    if (worker_.world_size > 1) {
      for (const auto& s : comm::allgather_strings(*worker_.comm, dump_json(tracer_->events()))) {
        traces.push_back(nlohmann::json::parse(s));
      }
    } else {
      traces.push_back(tracer_->events());
    }
  }
  if (!o.output.save_weights.empty()) save_parameters(o.output.save_weights);
  if (worker_.rank != 0) return;
  if (tracer_) write_file_atomic(o.output.trace_path, dump_json(make_trace(traces)) + "\n");
  if (profiler_) result_.backward_profile = profiler_->to_json();
  if (!o.output.json_path.empty()) write_file_atomic(o.output.json_path, dump_json(to_json(result_), 2) + "\n");
}

TrainResult Trainer::run(TrainObserver& observer) {
  const TrainOptions& o = result_.config.options;
  result_.steps.clear();
  if (!o.output.save_initial_weights.empty()) save_parameters(o.output.save_initial_weights);
  if (worker_.world_size > 1) worker_.comm->barrier();  // start the clocks together
  result_.started_at = utc_timestamp();
  log_run_start();
  observer.on_start(result_);
  double measure_start = 0;
  std::optional<int64_t> tcp_start;
  for (int64_t step = start_step_; step < o.run.steps; ++step) {
    if (step == start_step_ + o.run.warmup) {
      measure_start = now_seconds();
      measuring_ = true;
      if (worker_.world_size > 1) tcp_start = tcp_bytes_acked();
    }
    const double lr = schedule_.at(step);
    set_learning_rate(*optimizer_, lr);
    result_.steps.push_back(run_step(step, observer));
    result_.steps.back().lr = lr;
    observer.on_step(result_.steps.back(), result_);
    if (after_step(step, observer)) break;  // the target is reached
  }
  const double wall = measuring_ ? now_seconds() - measure_start - paused_seconds_ : 0.0;
  // The steps' traffic ends here: gathering sharded parameters for the
  // replica check, the saved weights and a final evaluation is not a step's.
  // Its last sends may still wait in this process's socket queues.
  if (tcp_start) wait_tcp_sends_acked(2.0);
  const std::optional<int64_t> tcp_end = tcp_start ? tcp_bytes_acked() : std::nullopt;
  sync_->need_parameters();
  finish_convergence();
  record_strategy_report(sync_->report());
  measure_final_noise(observer);
  result_.finished_at = utc_timestamp();
  if (worker_.world_size > 1) {
    const auto measured = std::count_if(result_.steps.begin(), result_.steps.end(),
                                        [](const StepRecord& r) { return r.measured; });
    record_bucket_bytes();  // a strategy whose bytes depend on the step (sparse rows) knows them now
    summarize_comm(result_.steps, worker_.world_size, result_.comm);
    gather_rank_times();
    gather_comm_facts(tcp_end ? static_cast<double>(*tcp_end - *tcp_start) : -1.0,
                      std::max<int64_t>(1, measured));
  } else if (result_.exchanged) {  // one worker and its servers
    summarize_comm(result_.steps, 1, result_.comm);
    result_.comm.formula_bytes_sent = {sync_->info().formula_bytes_sent};
    result_.comm.tcp_bytes_sent = {-1.0};
  }
  gather_memory();
  if (noise_) result_.noise = noise_->report();
  if (!final_noise_report_.is_null()) {
    if (!result_.noise.is_object()) result_.noise = nlohmann::json::object();
    result_.noise["final"] = final_noise_report_;
  }
  result_.data.pipeline = data_->stats();
  result_.runtime.amp_skipped_steps = scaler_->skipped_steps();
  result_.runtime.loss_scale = scaler_->scale();
  result_.summary = summarize_steps(result_.steps, result_.config.global_batch, wall);
  result_.summary.world_size = worker_.world_size;
  write_outputs();
  observer.on_finish(result_);
  return result_;
}

}  // namespace dlscale::train
