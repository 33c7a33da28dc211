#include "train/trainer.h"

#include "core/clock.h"
#include "core/files.h"
#include "core/memory.h"
#include "core/threads.h"
#include "core/torch_compat.h"
#include "data/synthetic.h"
#include "train/optimizer.h"

namespace dlscale::train {

void ConsoleObserver::on_start(const TrainResult& result) { print_header(out_, result); }

void ConsoleObserver::on_step(const StepRecord& step, const TrainResult& result) {
  const TrainOptions& o = result.config.options;
  if (o.display_every == 0) return;
  const bool first = step.step == 0;
  const bool last = step.step + 1 == o.steps;
  if (first || last || (step.step + 1) % o.display_every == 0) {
    print_step_line(out_, step, o.steps, result.config.global_batch);
  }
}

void ConsoleObserver::on_finish(const TrainResult& result) { print_summary(out_, result); }

Trainer::Trainer(const TrainOptions& options, std::vector<std::string> argv)
    : device_(torch::kCPU) {
  result_.config = resolve_train_options(options);
  result_.argv = std::move(argv);
  const TrainOptions& o = result_.config.options;
  device_ = torch::Device(o.device);
  set_compute_threads(o.threads);
  if (o.keep_freed_memory) keep_freed_memory();

  const models::ModelSpec& spec = models::find_model(o.model);
  models::ModelOptions mo;
  mo.num_classes = o.num_classes;
  mo.image_size = o.image_size;
  mo.aux_logits = o.aux_logits;
  torch::manual_seed(o.seed);
  model_ = models::make_model(spec, mo);
  aux_loss_weight_ = spec.aux_loss_weight;

  models::ModelFacts& facts = result_.model;
  facts.name = spec.name;
  facts.channels = spec.channels;
  facts.image_size = o.image_size;
  facts.num_classes = o.num_classes;
  facts.parameters = models::count_parameters(*model_);
  facts.macs_per_sample = models::count_macs_per_sample(*model_, spec.channels, o.image_size);

  model_->to(device_);
  if (result_.config.memory_format == MemoryFormat::kChannelsLast) {
    torch::NoGradGuard no_grad;
    for (auto& p : model_->parameters()) {
      if (p.dim() == 4) p.set_data(compat::with_memory_format(p, /*channels_last=*/true));
    }
  }
  model_->train();
  optimizer_ = make_optimizer(result_.config.optimizer, model_->parameters(), o);

  data::SyntheticOptions so;
  so.global_batch = result_.config.global_batch;
  so.rank = 0;
  so.world_size = result_.config.world_size;
  so.channels = spec.channels;
  so.image_size = o.image_size;
  so.num_classes = o.num_classes;
  so.pool_batches = o.synthetic_batches;
  so.seed = o.seed + 1;  // data stream independent of the initialization stream
  so.device = device_;
  so.channels_last = result_.config.memory_format == MemoryFormat::kChannelsLast;
  data_ = std::make_unique<data::SyntheticData>(so);

  result_.system = collect_system_info();  // after LibTorch loaded its BLAS
  result_.runtime.torch_version = compat::torch_version();
  result_.runtime.compute_threads = compute_threads();
  result_.runtime.blas_threads = blas_threads();
  result_.runtime.blas_config = blas_config();
  result_.runtime.device = device_.str();
  result_.runtime.data_source = data_->name();
}

Trainer::~Trainer() = default;

StepRecord Trainer::run_step(int64_t step) {
  StepRecord rec;
  rec.step = step;
  rec.measured = step >= result_.config.options.warmup;
  auto stamp = [this] {
    compat::synchronize(device_);
    return now_seconds();
  };
  const double t0 = stamp();
  const data::Batch batch = data_->batch(step);
  const double t1 = stamp();
  const models::Logits logits = model_->forward(batch.inputs);
  torch::Tensor loss = torch::nn::functional::cross_entropy(logits.main, batch.labels);
  for (const auto& aux : logits.aux) {
    loss = loss + aux_loss_weight_ * torch::nn::functional::cross_entropy(aux, batch.labels);
  }
  const double t2 = stamp();
  compat::zero_grad_to_none(*optimizer_);
  loss.backward();
  const double t3 = stamp();
  optimizer_->step();
  const double t4 = stamp();
  rec.loss = loss.item<double>();
  rec.times = {t1 - t0, t2 - t1, t3 - t2, t4 - t3, t4 - t0};
  return rec;
}

TrainResult Trainer::run(TrainObserver& observer) {
  const TrainOptions& o = result_.config.options;
  result_.steps.clear();
  result_.started_at = utc_timestamp();
  observer.on_start(result_);
  double measure_start = 0;
  for (int64_t step = 0; step < o.steps; ++step) {
    if (step == o.warmup) measure_start = now_seconds();
    result_.steps.push_back(run_step(step));
    observer.on_step(result_.steps.back(), result_);
  }
  const double wall = now_seconds() - measure_start;
  result_.finished_at = utc_timestamp();
  result_.summary = summarize_steps(result_.steps, result_.config.global_batch, wall);
  if (!o.json_path.empty()) write_file_atomic(o.json_path, to_json(result_).dump(2) + "\n");
  observer.on_finish(result_);
  return result_;
}

}  // namespace dlscale::train
