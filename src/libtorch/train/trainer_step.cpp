// One training step of the Trainer (libtorch/train/trainer.h): its micro-batches'
// forward and backward passes (--accumulate, libtorch/train/accumulate.h), the
// strategy's exchange, the noise-scale probe, clipping and the update, and
// the step's phase times and trace spans.
#include <fmt/format.h>

#include <functional>

#include "core/clock.h"
#include "core/error.h"
#include "libtorch/compute/phase_clock.h"
#include "libtorch/compute/torch_compat.h"
#include "libtorch/dp/grad_clip.h"
#include "libtorch/dp/gradient_sync.h"
#include "libtorch/train/accumulate.h"
#include "libtorch/train/amp.h"
#include "libtorch/train/backward_profile.h"
#include "libtorch/train/noise_scale.h"
#include "libtorch/train/optimizer.h"
#include "libtorch/train/trace.h"
#include "libtorch/train/trainer.h"

namespace dlscale::train {

std::optional<compat::AutocastScope> Trainer::autocast() const {
  const AmpMode amp = result_.config.options.compute.amp;
  if (amp == AmpMode::kNone) return std::nullopt;
  return std::optional<compat::AutocastScope>(std::in_place, device_, amp_dtype(amp));
}

torch::Tensor Trainer::forward_loss(const data::Batch& batch) {
  const auto autocast_scope = autocast();
  return task_->loss(model_->forward(batch.inputs), batch.targets,
                     {result_.config.options.recipe.label_smoothing, spec_.aux_loss_weight});
}

StepRecord Trainer::run_step(int64_t step, TrainObserver& observer) {
  StepRecord rec;
  rec.step = step;
  const bool probing = final_noise_ != nullptr;  // --noise-final: measured, not applied
  rec.measured = !probing && step >= start_step_ + result_.config.options.run.warmup;
  const int64_t k = result_.config.options.run.accumulate;
  // Phase boundaries (data, forward, backward per micro-batch, then the
  // exchange, the update, the end): host clock readings on CPU, events on
  // the compute stream on a GPU.
  PhaseClock& clock = *phase_clock_;
  sync_->begin_step();
  noise_now_ = !probing && noise_ && noise_->measures(step);
  // Adam's preconditioned noise scale only when asked (--noise-scale): it
  // costs a measured step about a fifth more than B_simple alone.
  if (noise_now_ && result_.config.options.run.noise_scale) {
    noise_->set_preconditioner(preconditioner_squares());
  }
  const double host_start = now_seconds();
  torch::Tensor losses;
  for (int64_t m = 0; m < k; ++m) {
    const auto mark = static_cast<size_t>(3 * m);
    clock.mark(mark);
    observer.on_phase(step, "data");
    const data::Batch batch = data_->batch(step * k + m);  // micro-batch m of the step
    // The first batch against the task's tensors (real data for a TorchScript model).
    if (step == start_step_ && m == 0 && spec_.checks_batches) {
      const TrainOptions& o = result_.config.options;
      const std::string mismatch = models::batch_mismatch(spec_, o.model, batch, o.data.spec);
      DLSCALE_CHECK(mismatch.empty(), "{}", mismatch);
    }
    rec.items += step_items(batch);
    clock.mark(mark + 1);
    observer.on_phase(step, "forward");
    if (m == 0 && worker_.world_size > 1 &&
        result_.config.options.sync.sync_buffers == dp::SyncBuffers::kStep) {
      broadcast_buffers();
    }
    sync_->need_parameters();
    const torch::Tensor loss = forward_loss(batch);
    clock.mark(mark + 2);
    observer.on_phase(step, "backward");
    if (m == 0) compat::zero_grad_to_none(*optimizer_);
    losses = m == 0 ? loss.detach() : losses + loss.detach();
    backward(loss, m, k, rec.measured);
  }
  const auto marks = static_cast<size_t>(3 * k);
  clock.mark(marks);
  observer.on_phase(step, "comm");
  const dp::SyncStepStats comm = sync_->end_backward();
  const bool exchanges = result_.exchanged;
  clock.mark(marks + 1);  // one worker alone: no comm, the phase is empty
  observer.on_phase(step, "optimizer");
  const bool finite = scaler_->unscale(model_->parameters());
  if (probing) {
    if (finite) final_noise_->add(model_->parameters());  // an overflow is not counted
  } else if (finite) {
    measure_noise(step);
    clip_gradients();
    sync_->apply_update(*optimizer_);
    ++updates_;
  } else if (noise_now_) {
    noise_->skip_step();  // an overflow: the step is not measured
  }
  clock.mark(marks + 2);
  const std::vector<double> offsets = clock.offsets();
  rec.loss = losses.item<double>() / static_cast<double>(k);  // the micro-batches' mean
  rec.times = step_times(offsets, k, exchanges);
  rec.comm_busy = comm.busy_seconds;
  if (tracer_ && !probing) trace_step(step, host_start, offsets, exchanges, comm);
  return rec;
}

void Trainer::backward(const torch::Tensor& loss, int64_t micro_batch, int64_t micro_batches,
                       bool measured) {
  if (noise_now_) noise_->begin_backward(micro_batch, scaler_->enabled() ? scaler_->scale() : 1.0);
  backward_pass(loss, micro_batch, micro_batches, measured);
  if (noise_now_) noise_->end_backward();
}

void Trainer::measure_noise(int64_t step) {
  if (!noise_now_) return;
  const double averaged = sync_->averaged_gradient_sq_norm(model_->parameters());
  double weighted = averaged_weighted_sq();
  // ps: the shards hold Adam's state and took both sums of P^2 g^2.
  if (const auto served = sync_->served_weighted_sq();
      served && result_.config.options.run.noise_scale) {
    weighted = served->averaged;
    noise_->serve_weighted(served->own);
  }
  std::function<double(double)> summed;
  if (worker_.world_size > 1) summed = [this](double value) { return sum_over_workers(value); };
  noise_->finish_step(step, averaged, weighted, summed);
  piece_squares_.clear();
  sharded_squares_ = false;
}

void Trainer::measure_final_noise(TrainObserver& observer) {
  const int64_t n = result_.config.options.run.noise_final;
  if (n == 0) return;
  const double start = now_seconds();
  std::vector<torch::Tensor> buffers;
  {
    torch::NoGradGuard no_grad;
    for (const auto& b : model_->buffers()) buffers.push_back(b.clone());
  }
  // Adam's P^2 at the final state; the workers hold it whole (zero and ps
  // are refused: resolve.cpp).
  final_noise_ =
      std::make_unique<FinalNoise>(static_cast<double>(result_.config.global_batch),
                                   adam_preconditioner_squares(*optimizer_, model_->parameters()));
  const int64_t first = result_.steps.empty() ? start_step_ : result_.steps.back().step + 1;
  for (int64_t i = 0; i < n; ++i) {
    run_step(first + i, observer);
    observer.on_final_noise(i + 1, n, now_seconds() - start);
  }
  final_noise_report_ = final_noise_->report(now_seconds() - start);
  final_noise_.reset();
  compat::zero_grad_to_none(*optimizer_);
  torch::NoGradGuard no_grad;
  const std::vector<torch::Tensor> now = model_->buffers();
  for (size_t k = 0; k < now.size(); ++k) now[k].copy_(buffers[k]);
}

std::vector<torch::Tensor> Trainer::preconditioner_squares() {
  piece_squares_.clear();
  sharded_squares_ = false;
  const torch::optim::Optimizer* own = sync_->own_optimizer();
  // The workers hold Adam's state (the parameter server's shards do: none).
  if (own == nullptr) return adam_preconditioner_squares(*optimizer_, model_->parameters());
  // zero: each worker's optimizer holds the state of its pieces, from the
  // first update on; all of them take part in putting P^2 together.
  if (dynamic_cast<const torch::optim::Adam*>(own) == nullptr || updates_ == 0) return {};
  const std::vector<torch::Tensor> pieces = sync_->own_parameters();
  piece_squares_ = adam_preconditioner_squares(*own, pieces);
  DLSCALE_ASSERT(piece_squares_.size() == pieces.size());
  sharded_squares_ = true;
  return sync_->assemble_pieces(piece_squares_);
}

double Trainer::averaged_weighted_sq() {
  // Where this worker's .grad is the average it applies.
  if (!sharded_squares_) return noise_->averaged_weighted_sq(model_->parameters());
  // zero: over this worker's pieces of the averaged gradient, then the workers.
  std::vector<torch::Tensor> grads;
  for (const auto& piece : sync_->own_parameters()) grads.push_back(piece.grad());
  return sum_over_workers(weighted_sq_sum(grads, piece_squares_));
}

double Trainer::sum_over_workers(double value) {
  comm::Communicator& comm = *worker_.comm;
  // The job's communicator stages a host tensor through its backend's device.
  return dp::sum_doubles_over_workers(value, comm.rank(), comm.size(), [&comm](torch::Tensor& t) {
    comm.allreduce(t, comm::ReduceOp::kSum);
  });
}

void Trainer::backward_pass(const torch::Tensor& loss, int64_t micro_batch, int64_t micro_batches,
                            bool measured) {
  if (micro_batches == 1) {
    sync_->begin_backward();
    if (profiler_) profiler_->begin(now_seconds());
    scaler_->scale_loss(loss).backward();
    if (profiler_) profiler_->end(now_seconds(), measured);
    return;
  }
  // Each micro-batch's mean loss counts 1/K: the sum of the K gradients is
  // the gradient of the mean over the step's samples.
  const torch::Tensor scaled = scaler_->scale_loss(loss / static_cast<double>(micro_batches));
  if (micro_batch + 1 < micro_batches) {
    sync_->begin_local_backward();
    scaled.backward();
    sync_->end_local_backward();
    return;
  }
  const std::vector<torch::Tensor> params = model_->parameters();
  const std::vector<torch::Tensor> earlier = take_gradients(params);
  sync_->begin_backward();
  if (profiler_) profiler_->begin(now_seconds());
  with_gradients(scaled, params, earlier).backward();
  if (profiler_) profiler_->end(now_seconds(), measured);
}

int64_t Trainer::step_items(const data::Batch& batch) const {
  const std::optional<int64_t> local = task_->items_in(batch.targets);
  const int64_t n = local ? *local : data_->local_batch() * result_.model.unit.items_per_sample;
  return n * result_.config.world_size;  // every worker's slice of a global batch holds as many
}

void Trainer::trace_step(int64_t step, double start, const std::vector<double>& offsets,
                         bool exchanges, const dp::SyncStepStats& comm) {
  const nlohmann::json args = {{"step", step}};
  const size_t marks = offsets.size() - 3;  // 3 per micro-batch
  for (size_t m = 0; m < marks; m += 3) {
    tracer_->add("forward", "compute", start + offsets[m + 1], start + offsets[m + 2], args);
    tracer_->add("backward", "compute", start + offsets[m + 2], start + offsets[m + 3], args);
  }
  const double update = start + offsets[exchanges ? marks + 1 : marks];
  if (exchanges)
    tracer_->add("wait for gradients", "compute", start + offsets[marks], update, args);
  tracer_->add("optimizer", "compute", update, start + offsets[marks + 2], args);
  for (const auto& b : comm.buckets) {
    tracer_->add(fmt::format("{} bucket {}", result_.comm.strategy, b.bucket), "comm", b.start,
                 b.end, {{"step", step}, {"bytes", result_.comm.bucket_bytes[b.bucket]}});
  }
}

void Trainer::clip_gradients() {
  const double bound = result_.config.options.optimizer.clip_grad_norm;
  if (bound <= 0) return;
  const double norm = sync_->clip_gradients(model_->parameters(), bound);
  RuntimeInfo& rt = result_.runtime;
  ++rt.clip_steps;
  if (norm + 1e-6 > bound) ++rt.clipped_steps;  // scaled (coefficient below 1)
  rt.grad_norm_last = norm;
  rt.grad_norm_max = std::max(rt.grad_norm_max, norm);
}

}  // namespace dlscale::train
