// The Trainer's convergence side (docs/convergence.md): the learning-rate
// schedule, evaluations and the target, the MLPerf-style log, checkpoints
// and resuming.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "libtorch/comm/agreement.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/files.h"
#include "libtorch/compute/torch_compat.h"
#include "libtorch/train/checkpoint.h"
#include "libtorch/train/evaluator.h"
#include "libtorch/train/mllog.h"
#include "libtorch/train/optimizer.h"
#include "libtorch/train/trainer.h"

namespace dlscale::train {

namespace {

/// Steps between two events every `epochs` epochs (at least 1).
int64_t epoch_interval(double epochs, int64_t steps_per_epoch) {
  return std::max<int64_t>(1, epochs_to_steps(epochs, steps_per_epoch));
}

bool every(int64_t done, int64_t interval) { return interval > 0 && done % interval == 0; }

/// The MLPerf benchmark a zoo model is logged as: its name in MLPerf
/// Training where it is one of the benchmarks, else its own.
std::string mlperf_benchmark(const std::string& model) { return model == "resnet50" ? "resnet" : model; }

/// opt_name as MLPerf names it for `benchmark`: the closed resnet rules
/// know "sgd" (with or without momentum) and "lars"; any other optimizer
/// keeps dlscale's name (and fails those rules, as it should).
std::string mlperf_opt_name(const std::string& benchmark, OptimizerKind kind) {
  const bool sgd = kind == OptimizerKind::kSgd || kind == OptimizerKind::kMomentum;
  return benchmark == "resnet" && sgd ? "sgd" : to_string(kind);
}

/// The keys MLPerf's closed `resnet` rules (training 4.0:
/// closed_resnet_lars.yaml, closed_resnet_sgd.yaml) add for its optimizer,
/// under the reference's names. The decay keys describe a poly schedule
/// only: under another schedule they are left out, which the checker
/// reports (the closed rules ask for poly).
void log_resnet_keys(Mllog& log, const ResolvedTrainOptions& c, const LrSchedule& schedule) {
  const OptimizerOptions& o = c.options.optimizer;
  const RecipeOptions& r = c.options.recipe;
  const bool lars = o.kind == OptimizerKind::kLars;
  if (!lars && o.kind != OptimizerKind::kSgd && o.kind != OptimizerKind::kMomentum) return;
  const std::string p = lars ? "lars_" : "sgd_";
  log.point(p + "opt_base_learning_rate", schedule.peak());
  if (r.lr_schedule == LrScheduleKind::kPoly) {
    log.point(p + "opt_end_learning_rate", schedule.peak() * r.lr_end_factor);
    log.point(p + "opt_learning_rate_decay_poly_power", r.lr_power);
    log.point(p + "opt_learning_rate_decay_steps", c.options.run.steps - schedule.warmup_steps());
  }
  log.point(p + "opt_momentum", o.kind == OptimizerKind::kSgd ? 0.0 : o.momentum);
  log.point(p + "opt_weight_decay", o.weight_decay);
  if (lars) {
    log.point("lars_epsilon", 0.0);  // the trust ratio adds no epsilon (libtorch/train/lars.h)
    log.point("lars_opt_learning_rate_warmup_epochs", r.warmup_epochs);
  } else {
    log.point("model_bn_span", c.options.run.batch);  // BatchNorm's statistics are each worker's batch
  }
}

}  // namespace

void Trainer::setup_convergence(const data::SourceOptions& source) {
  const ResolvedTrainOptions& c = result_.config;
  const RecipeOptions& r = c.options.recipe;
  schedule_ = LrSchedule(r, c.options.optimizer.lr, c.global_batch, std::max<int64_t>(1, steps_per_epoch_),
                         c.options.run.steps);
  ConvergenceSummary& conv = result_.convergence;
  conv.lr_peak = schedule_.peak();
  conv.lr_warmup_steps = schedule_.warmup_steps();
  conv.target = target_fraction(r.target_accuracy);
  conv.enabled = r.epochs > 0 || r.eval_every > 0 || r.eval_every_steps > 0 || conv.target > 0;
  conv.metrics = task_->metrics();
  if (worker_.rank == 0 && !r.mllog_path.empty()) {
    mllog_ = std::make_unique<Mllog>(r.mllog_path);
    mllog_->start("init_start", nlohmann::json::object(), wall_ms_at(init_start_));
    // MLPerf's rules ask for the key, true; dropping the page cache before
    // the run is the submitter's step, not dlscale's (docs/mllog.md).
    mllog_->point("cache_clear", true);
  }
  if (!conv.enabled) return;
  DLSCALE_CHECK(!conv.metrics.empty(), "model '{}' ({}) has no quality metric to evaluate (--epochs, "
                "--eval-every, --target-accuracy)", c.options.model.name, task_->name());
  const data::OpenedData test = [&] {
    try {
      return data::open_data(c.options.data, c.channels, data::Split::kTest);
    } catch (const data::MissingSplit& e) {
      throw Error(fmt::format("evaluation (--epochs, --eval-every, --target-accuracy) needs a "
                              "test split: {}",
                              e.what()));
    }
  }();
  data::SourceOptions eval_source = source;
  eval_source.global_batch = r.eval_batch * c.world_size;
  eval_source.synthetic = task_->synthetic_test(spec_, c.options.model, source.seed);  // synthetic's held-out samples
  evaluator_ = std::make_unique<Evaluator>(test, c.options.data, eval_source, task_);
}

void Trainer::log_submission() {
  const ResolvedTrainOptions& c = result_.config;
  const RecipeOptions& r = c.options.recipe;
  const std::string device = result_.runtime.gpu.empty() ? result_.system.cpu_model : result_.runtime.gpu;
  mllog_->point("submission_benchmark", mlperf_benchmark(c.options.model.name));
  mllog_->point("submission_org", r.mllog_org);
  mllog_->point("submission_platform",
                r.mllog_platform.empty() ? fmt::format("{}x {}", c.world_size, device) : r.mllog_platform);
  mllog_->point("submission_division", to_string(r.mllog_division));
  mllog_->point("submission_status", to_string(r.mllog_status));
}

void Trainer::log_run_start() {
  run_start_ = now_seconds();
  result_.convergence.init_seconds = run_start_ - init_start_;
  if (!mllog_) return;
  const ResolvedTrainOptions& c = result_.config;
  const RecipeOptions& r = c.options.recipe;
  log_submission();
  mllog_->point("seed", c.options.run.seed);
  mllog_->point("global_batch_size", c.global_batch);
  const std::string benchmark = mlperf_benchmark(c.options.model.name);
  mllog_->point("gradient_accumulation_steps", 1);  // dlscale steps on every batch
  mllog_->point("opt_name", mlperf_opt_name(benchmark, c.options.optimizer.kind));
  mllog_->point("opt_base_learning_rate", schedule_.peak());
  mllog_->point("opt_learning_rate_warmup_epochs", r.warmup_epochs);
  mllog_->point("opt_learning_rate_schedule", to_string(r.lr_schedule));
  mllog_->point("opt_weight_decay", c.options.optimizer.weight_decay);
  mllog_->point("train_samples", result_.data.samples);
  mllog_->point("eval_samples", evaluator_ ? evaluator_->samples() : 0);
  if (benchmark == "resnet") log_resnet_keys(*mllog_, c, schedule_);
  mllog_->end("init_stop");
  mllog_->start("run_start");
  if (steps_per_epoch_ > 0 && start_step_ % steps_per_epoch_ == 0) {
    mllog_->start("epoch_start", {{"epoch_num", start_step_ / steps_per_epoch_ + 1}});
  }
}

double Trainer::run_seconds() const { return prior_run_seconds_ + now_seconds() - run_start_; }

bool Trainer::after_step(int64_t step, TrainObserver& observer) {
  const RecipeOptions& r = result_.config.options.recipe;
  const int64_t done = step + 1;
  const bool last = done == result_.config.options.run.steps;
  const int64_t spe = steps_per_epoch_;
  const bool epoch_end = mllog_ && spe > 0 && every(done, spe);
  if (epoch_end) mllog_->end("epoch_stop", {{"epoch_num", done / spe}});
  bool stop = false;
  if (evaluator_) {
    const bool due = r.eval_every_steps > 0 ? every(done, r.eval_every_steps)
                     : r.eval_every > 0     ? every(done, epoch_interval(r.eval_every, spe))
                                            : every(done, spe);
    if (due || last) stop = evaluate(done, observer);
  }
  const int64_t ckpt_interval = r.checkpoint_every > 0 ? r.checkpoint_every
                                : r.checkpoint_every_epochs > 0
                                    ? epoch_interval(r.checkpoint_every_epochs, spe)
                                    : 0;
  // Without an interval, --checkpoint keeps the state at the end of the run.
  const bool at_end = ckpt_interval == 0 && (last || stop) && !r.checkpoint_path.empty();
  if ((!stop && every(done, ckpt_interval)) || at_end) save_checkpoint(done);
  // The next epoch starts after the evaluation and checkpoint between them.
  if (epoch_end && !last && !stop) mllog_->start("epoch_start", {{"epoch_num", done / spe + 1}});
  return stop;
}

bool Trainer::evaluate(int64_t done, TrainObserver& observer) {
  const double start = now_seconds();
  ConvergenceSummary& conv = result_.convergence;
  const double epoch = static_cast<double>(done) / static_cast<double>(steps_per_epoch_);
  // Whole epochs as integers, as epoch_start/epoch_stop give them.
  const nlohmann::json epoch_num = done % steps_per_epoch_ == 0
                                       ? nlohmann::json(done / steps_per_epoch_)
                                       : nlohmann::json(epoch);
  if (mllog_) mllog_->start("eval_start", {{"epoch_num", epoch_num}});
  sync_->need_parameters();
  // Every rank evaluates rank 0's batch-norm statistics, as one process would.
  if (worker_.world_size > 1) broadcast_buffers();
  const EvalSums sums = [&] {
    const auto autocast_scope = autocast();  // evaluated in the precision it trains in
    return evaluator_->run(*model_, worker_.comm, [&] { observer.on_phase(done - 1, "eval"); });
  }();
  EvalRecord e;
  e.step = done;
  e.epoch = epoch;
  e.samples = sums.samples;
  for (size_t m = 0; m < conv.metrics.size(); ++m) {
    e.metrics.emplace_back(conv.metrics[m].name, sums.samples > 0 ? sums.sums[m] / sums.samples : 0.0);
  }
  e.seconds = now_seconds() - start;
  e.run_seconds = run_seconds();
  conv.eval_seconds += e.seconds;
  if (measuring_) paused_seconds_ += e.seconds;
  conv.evals.push_back(e);
  if (mllog_) {
    mllog_->end("eval_stop", {{"epoch_num", epoch_num}});
    mllog_->point("eval_accuracy", e.metrics.front().second, {{"epoch_num", epoch_num}});
  }
  observer.on_eval(e, result_);
  const MetricSpec& quality = conv.metrics.front();  // a target is set on the first
  const double value = e.metrics.front().second;
  if (conv.target > 0 && (quality.higher_is_better ? value >= conv.target : value <= conv.target)) {
    conv.status = "success";
    conv.epochs_to_target = epoch;
    return true;
  }
  return false;
}

void Trainer::finish_convergence() {
  ConvergenceSummary& conv = result_.convergence;
  const int64_t done = result_.steps.empty() ? start_step_ : result_.steps.back().step + 1;
  conv.steps_done = done;
  conv.epochs_done =
      steps_per_epoch_ > 0 ? static_cast<double>(done) / static_cast<double>(steps_per_epoch_) : 0;
  conv.run_seconds = run_seconds();
  if (conv.target > 0 && conv.status.empty()) conv.status = "aborted";
  if (!mllog_) return;
  if (steps_per_epoch_ > 0 && done % steps_per_epoch_ != 0) {
    mllog_->end("epoch_stop", {{"epoch_num", done / steps_per_epoch_ + 1}});
  }
  mllog_->end("run_stop", {{"status", conv.status.empty() ? "success" : conv.status}});
}

CheckpointMeta Trainer::checkpoint_meta(int64_t next_step) const {
  const ResolvedTrainOptions& c = result_.config;
  CheckpointMeta m;
  m.model = c.options.model.name;
  m.world_size = c.world_size;
  m.global_batch = c.global_batch;
  m.optimizer = to_string(c.options.optimizer.kind);
  m.parameters = static_cast<int64_t>(model_->parameters().size());
  m.buffers = static_cast<int64_t>(model_->buffers().size());
  m.seed = c.options.run.seed;
  m.data = c.options.data.spec;
  m.next_step = next_step;
  m.steps = c.options.run.steps;
  m.run_seconds = run_seconds();
  m.lr_curve = schedule_.samples_from(next_step);
  m.evals = result_.convergence.evals;
  m.metrics = result_.convergence.metrics;
  return m;
}

void Trainer::save_checkpoint(int64_t next_step) {
  const double start = now_seconds();
  CheckpointState state;
  const torch::Tensor rng = compat::cpu_rng_state();
  if (worker_.world_size > 1) {
    const torch::Tensor all = worker_.comm->allgather(rng);  // every rank's dropout stream
    for (int r = 0; r < worker_.world_size; ++r) state.rng.push_back(all[r].clone());
  } else {
    state.rng.push_back(rng);
  }
  if (worker_.rank == 0) {
    state.meta = checkpoint_meta(next_step);
    for (const auto& p : model_->parameters()) state.tensors.push_back(p.detach().cpu().contiguous());
    for (const auto& b : model_->buffers()) state.tensors.push_back(b.detach().cpu().contiguous());
    state.optimizer = save_optimizer(*optimizer_);
    write_file_atomic(checkpoint_file(result_.config.options.recipe.checkpoint_path, next_step),
                      encode_checkpoint(state));
  }
  const double seconds = now_seconds() - start;
  result_.convergence.checkpoint_seconds += seconds;
  if (measuring_) paused_seconds_ += seconds;
}

namespace {

/// The checkpoint's bytes on every rank: rank 0 reads the file (it need not
/// be on a file system the other nodes share) and broadcasts it.
std::string read_checkpoint(const std::string& path, int rank, comm::Communicator* comm) {
  std::string bytes;
  std::string error;
  if (rank == 0) {
    try {
      const std::string kind = special_file_kind(path);  // /dev/zero would never end
      DLSCALE_CHECK(kind.empty(), "--resume {} is {}, not a checkpoint file", path, kind);
      bytes = read_file(path);
    } catch (const Error& e) {
      error = e.what();
    }
  }
  if (comm == nullptr || comm->size() == 1) {
    if (!error.empty()) throw Error(error);
    return bytes;
  }
  torch::Tensor size = torch::tensor({error.empty() ? static_cast<int64_t>(bytes.size()) : -1});
  comm->broadcast(size, 0);
  DLSCALE_CHECK(size.item<int64_t>() >= 0, "{}", error.empty() ? "rank 0 could not read --resume " + path : error);
  torch::Tensor data = torch::empty({size.item<int64_t>()}, torch::kUInt8);
  if (rank == 0) std::memcpy(data.data_ptr(), bytes.data(), bytes.size());
  comm->broadcast(data, 0);
  return {static_cast<const char*>(data.data_ptr()), static_cast<size_t>(data.numel())};
}

}  // namespace

/// A resumed run must continue on the learning-rate curve the checkpoint
/// was written on: the same --lr, scaling, warm-up and schedule, and for
/// poly, cosine and onecycle the same run length. Checked at the steps the
/// checkpoint sampled (those within this run).
void Trainer::check_lr_curve(const CheckpointMeta& meta, const std::string& path) const {
  const int64_t steps = result_.config.options.run.steps;
  DLSCALE_CHECK(meta.steps == steps || !schedule_.depends_on_length(),
                "checkpoint {} was written by a run of {} steps; --lr-schedule {} depends on the "
                "run's length and this run has {} (resume with the same --steps or --epochs)",
                path, meta.steps, to_string(result_.config.options.recipe.lr_schedule), steps);
  for (const auto& [step, saved] : meta.lr_curve) {  // empty when written before it was kept
    if (step >= steps) break;
    const double now = schedule_.at(step);
    DLSCALE_CHECK(std::abs(now - saved) <= 1e-9 * std::max(std::abs(now), std::abs(saved)),
                  "checkpoint {} continues a different learning-rate curve: step {} had lr {:g}, this "
                  "run gives {:g} (resume with the same --lr, --lr-scaling, warm-up, --lr-schedule "
                  "and run length)",
                  path, step, saved, now);
  }
}

void Trainer::resume_from(const std::string& path) {
  const ResolvedTrainOptions& c = result_.config;
  const CheckpointState state =
      decode_checkpoint(read_checkpoint(path, worker_.rank, worker_.comm), path);
  const CheckpointMeta& m = state.meta;
  DLSCALE_CHECK(m.model == c.options.model.name, "checkpoint {} is of model {}, not {}", path, m.model,
                c.options.model.name);
  DLSCALE_CHECK(m.world_size == c.world_size,
                "checkpoint {} was written by {} workers; this run has {} (resume with the same "
                "worker count)",
                path, m.world_size, c.world_size);
  DLSCALE_CHECK(m.global_batch == c.global_batch, "checkpoint {} trained with global batch {}, not {}",
                path, m.global_batch, c.global_batch);
  DLSCALE_CHECK(m.optimizer == to_string(c.options.optimizer.kind),
                "checkpoint {} used --optimizer {}, not {}", path, m.optimizer,
                to_string(c.options.optimizer.kind));
  std::vector<torch::Tensor> targets = model_->parameters();
  for (const auto& b : model_->buffers()) targets.push_back(b);
  DLSCALE_CHECK(state.tensors.size() == targets.size(),
                "checkpoint {} holds {} tensors; model {} has {}", path, state.tensors.size(),
                m.model, targets.size());
  {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < targets.size(); ++i) {
      DLSCALE_CHECK(state.tensors[i].sizes() == targets[i].sizes() &&
                        state.tensors[i].scalar_type() == targets[i].scalar_type(),
                    "checkpoint {}: tensor {} is {} of shape {}, the model's is {} of shape {}",
                    path, i, c10::toString(state.tensors[i].scalar_type()),
                    fmt::format("{}", fmt::join(state.tensors[i].sizes(), "x")),
                    c10::toString(targets[i].scalar_type()),
                    fmt::format("{}", fmt::join(targets[i].sizes(), "x")));
      targets[i].copy_(state.tensors[i]);
    }
  }
  try {
    load_optimizer(*optimizer_, state.optimizer);
  } catch (const c10::Error& e) {
    throw Error(fmt::format("checkpoint {}: its optimizer state does not fit: {}", path,
                            e.what_without_backtrace()));
  } catch (const std::exception& e) {
    throw Error(fmt::format("checkpoint {} is damaged: its optimizer state cannot be read: {}",
                            path, e.what()));
  }
  if (state.rng.size() == static_cast<size_t>(c.world_size)) {
    compat::set_cpu_rng_state(state.rng[static_cast<size_t>(worker_.rank)]);
  }
  start_step_ = m.next_step;
  DLSCALE_CHECK(start_step_ < c.options.run.steps,
                "checkpoint {} is at step {}: nothing is left of this run's {} steps", path,
                start_step_, c.options.run.steps);
  check_lr_curve(m, path);
  prior_run_seconds_ = m.run_seconds;
  result_.convergence.evals = m.evals;
  result_.convergence.resumed_from_step = start_step_;
}

}  // namespace dlscale::train
