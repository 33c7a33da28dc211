#include "libtorch/train/train_result.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ostream.h>

#include "libtorch/compute/dtype_name.h"
#include "core/record_keys.h"
#include "core/text_table.h"
#include "libtorch/dp/strategy.h"
#include "libtorch/train/resolve.h"

namespace dlscale::train {

double phase_seconds(const StepTimes& t, size_t phase) {
  switch (phase) {
    case 0: return t.data;
    case 1: return t.forward;
    case 2: return t.backward;
    case 3: return t.comm;
    case 4: return t.optimizer;
    default: return t.total;
  }
}

StepTimes median_phase_times(const std::vector<StepRecord>& steps) {
  std::vector<double> phases[kNumPhases];
  for (const auto& r : steps) {
    if (!r.measured) continue;
    for (size_t p = 0; p < kNumPhases; ++p) phases[p].push_back(phase_seconds(r.times, p));
  }
  return {median(phases[0]), median(phases[1]), median(phases[2]),
          median(phases[3]), median(phases[4]), median(phases[5])};
}

void summarize_comm(const std::vector<StepRecord>& steps, int world_size, CommSummary& comm) {
  std::vector<double> busy;
  for (const auto& r : steps) {
    if (r.measured) busy.push_back(r.comm_busy);
  }
  const double busy_s = median(busy);
  comm.busy_ms_p50 = busy_s * 1e3;
  comm.algbw_gbps = busy_s > 0 ? static_cast<double>(comm.bytes_per_step) / busy_s / 1e9 : 0.0;
  const double factor = comm.bus_factor > 0 ? comm.bus_factor : 2.0 * (world_size - 1) / world_size;
  comm.busbw_gbps = comm.algbw_gbps * factor;
}

TrainSummary summarize_steps(const std::vector<StepRecord>& steps, int64_t global_batch,
                             double wall_seconds) {
  TrainSummary s;
  std::vector<double> rates, totals;
  for (const auto& r : steps) {
    if (!r.measured) continue;
    s.measured_items += r.items;
    totals.push_back(r.times.total);
    rates.push_back(r.times.total > 0 ? static_cast<double>(global_batch) / r.times.total : 0.0);
  }
  s.measured_steps = static_cast<int64_t>(totals.size());
  s.wall_seconds = wall_seconds;
  s.samples_per_sec = wall_seconds > 0 ? static_cast<double>(s.measured_steps * global_batch) / wall_seconds : 0.0;
  s.step_rate = summarize(rates);
  s.step_time = summarize(totals);
  s.median_times = median_phase_times(steps);
  if (!steps.empty()) {
    s.first_loss = steps.front().loss;
    s.last_loss = steps.back().loss;
  }
  return s;
}

double items_per_sample(const TrainResult& r) {
  const TrainSummary& s = r.summary;
  const int64_t samples = s.measured_steps * r.config.global_batch;
  const auto most = static_cast<double>(r.model.unit.items_per_sample);
  if (s.measured_items <= 0 || samples <= 0) return most;
  return static_cast<double>(s.measured_items) / static_cast<double>(samples);
}

double items_per_sec(const TrainResult& r) {
  return r.summary.samples_per_sec * items_per_sample(r);
}

namespace {

/// The measured batches' mean items per sample over the most a sample holds.
double length_share(const TrainResult& r) {
  const auto most = static_cast<double>(r.model.unit.items_per_sample);
  return most > 0 ? items_per_sample(r) / most : 1.0;
}

/// Each input's name, dtype and shape after the batch dimension.
nlohmann::json model_inputs_json(const std::vector<models::TensorSpec>& inputs) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& t : inputs) out.push_back({{"name", t.name}, {"dtype", dtype_name(t.dtype)}, {"shape", t.shape}});
  return out;
}

double ms(double seconds) { return seconds * 1e3; }

/// Per-rank TCP byte counts; null where the kernel did not report them.
nlohmann::json tcp_json(const std::vector<double>& bytes) {
  nlohmann::json out = nlohmann::json::array();
  for (double b : bytes) out.push_back(b >= 0 ? nlohmann::json(b) : nlohmann::json());
  return out;
}

double max_of(const std::vector<double>& v) {
  double m = -1;
  for (double x : v) m = std::max(m, x);
  return m;
}

}  // namespace

nlohmann::json data_json(const DataSummary& d, int64_t measured_steps) {
  const data::PipelineStats& p = d.pipeline;
  return {{"spec", d.spec},
          {"format", d.format},
          {"location", d.location},
          {"samples", d.samples},
          {"steps_per_epoch", d.steps_per_epoch},
          {"bytes", d.bytes},
          {"shards", d.shards},
          {"shards_opened", d.shards_opened},
          {"indexed_shards", d.indexed_shards},
          {"augment", d.augment},
          {"stage_s", d.stage_seconds},
          {"staged_bytes", d.staged_bytes},
          {"pipeline_busy_s", p.busy_seconds},
          {"pipeline_ms_per_batch", p.batches > 0 ? ms(p.busy_seconds) / p.batches : 0.0},
          {"pipeline_batches", p.batches},
          {"pipeline_samples", p.samples},
          {"skipped_corrupt", p.skipped},
          {"cache_hits", p.cache_hits},
          {"cache_bytes", p.cache_bytes},
          {"cache_full", p.cache_full},
          {"reduced_decodes", p.reduced_decodes},
          {"region_decodes", p.region_decodes},
          {"measured_steps", measured_steps}};
}

namespace {

nlohmann::json environment_json(const TrainResult& r) {
  nlohmann::json env = dlscale::to_json(r.system);
  env["torch_version"] = r.runtime.torch_version;
  env["compute_threads"] = r.runtime.compute_threads;
  env["blas_threads"] = r.runtime.blas_threads;
  env["blas_config"] = r.runtime.blas_config;
  env["device"] = r.runtime.device;
  env["gpu"] = r.runtime.gpu;
  env["phase_timing"] = r.runtime.phase_timing;
  env["data_source"] = r.runtime.data_source;
  return env;
}

nlohmann::json breakdown_json(const StepTimes& t) {
  nlohmann::json b = nlohmann::json::object();
  for (size_t p = 0; p < kNumPhases; ++p) b[kPhaseNames[p]] = ms(phase_seconds(t, p));
  return b;
}

/// results.comm: null unless gradients were exchanged.
nlohmann::json comm_json(const TrainResult& r) {
  using namespace record;
  if (!r.exchanged) return nullptr;
  return {{"backend", r.comm.backend},
          {"strategy", r.comm.strategy},
          {"layout", r.comm.layout},
          {"wire_dtype", r.comm.wire_dtype},
          {"nodes", r.comm.nodes},
          {"buckets", r.comm.bucket_bytes.size()},
          {"bucket_bytes", r.comm.bucket_bytes},
          {kCommBytesPerStep, r.comm.bytes_per_step},
          {kCommBusyMsP50, r.comm.busy_ms_p50},
          {kCommAlgbwGbps, r.comm.algbw_gbps},
          {kCommBusbwGbps, r.comm.busbw_gbps},
          {"bytes_sent_formula", r.comm.formula},
          {kCommBytesSentFormula, r.comm.formula_bytes_sent},
          {kCommBytesSentTcp, tcp_json(r.comm.tcp_bytes_sent)},
          {"replicas_should_match", r.comm.replicas_should_match},
          {kCommReplicasIdentical, r.comm.replicas_identical}};
}

/// "steps": each step's loss, rate and phase times, column by column.
nlohmann::json steps_json(const std::vector<StepRecord>& steps) {
  nlohmann::json per_step = {{"step", nlohmann::json::array()},
                             {"loss", nlohmann::json::array()},
                             {"lr", nlohmann::json::array()},
                             {"measured", nlohmann::json::array()}};
  for (const char* name : kPhaseNames) per_step[std::string(name) + "_ms"] = nlohmann::json::array();
  for (const auto& step : steps) {
    per_step["step"].push_back(step.step);
    per_step["loss"].push_back(step.loss);
    per_step["lr"].push_back(step.lr);
    per_step["measured"].push_back(step.measured);
    for (size_t p = 0; p < kNumPhases; ++p) {
      per_step[std::string(kPhaseNames[p]) + "_ms"].push_back(ms(phase_seconds(step.times, p)));
    }
  }
  return per_step;
}

/// Each figure's max over ranks (what a worker must have), and each rank's.
/// What a worker must have: each figure's max over ranks, and the largest
/// total any one rank keeps (not the sum of the maxima).
struct MostKept {
  RankMemory figures;
  int64_t total = 0;
};
MostKept most_kept(const std::vector<RankMemory>& ranks) {
  MostKept most{ranks.front(), ranks.front().total()};
  for (const RankMemory& m : ranks) {
    most.figures.params = std::max(most.figures.params, m.params);
    most.figures.grads = std::max(most.figures.grads, m.grads);
    most.figures.optimizer = std::max(most.figures.optimizer, m.optimizer);
    most.figures.peak_rss = std::max(most.figures.peak_rss, m.peak_rss);
    most.figures.device_peak = std::max(most.figures.device_peak, m.device_peak);
    most.total = std::max(most.total, m.total());
  }
  return most;
}

/// Each figure's max over ranks (what a worker must have), and each rank's.
nlohmann::json memory_json(const std::vector<RankMemory>& ranks) {
  if (ranks.empty()) return nullptr;
  auto known = [](int64_t bytes) { return bytes >= 0 ? nlohmann::json(bytes) : nlohmann::json(); };
  auto row = [&known](const RankMemory& m, int64_t total) {
    return nlohmann::json{{"params_bytes", m.params},
                          {"grads_bytes", m.grads},
                          {"optimizer_bytes", m.optimizer},
                          {"total_bytes", total},
                          {"peak_rss_bytes", known(m.peak_rss)},
                          {"device_peak_bytes", known(m.device_peak)}};
  };
  const MostKept most = most_kept(ranks);
  nlohmann::json j = row(most.figures, most.total);
  j["per_rank"] = nlohmann::json::array();
  for (const RankMemory& m : ranks) j["per_rank"].push_back(row(m, m.total()));
  return j;
}

nlohmann::json results_json(const TrainResult& r) {
  using namespace record;
  const TrainSummary& s = r.summary;
  nlohmann::json per_rank = nlohmann::json::array();
  for (const auto& t : r.rank_median_times) per_rank.push_back(breakdown_json(t));
  nlohmann::json results = {
      {kSamplesPerSec, s.samples_per_sec},
      {kSamplesPerSecMean, s.step_rate.mean},
      {kSamplesPerSecUncertainty, s.step_rate.uncertainty},
      {kSamplesPerSecJitter, s.step_rate.jitter},
      {kStepTimeMeanMs, ms(s.step_time.mean)},
      {kStepTimeP50Ms, ms(s.step_time.p50)},
      {kStepTimeP95Ms, ms(s.step_time.p95)},
      {kWallSeconds, s.wall_seconds},
      {"measured_steps", s.measured_steps},
      {kBreakdownMs, breakdown_json(s.median_times)},
      {"breakdown_ms_per_rank", per_rank},
      {kComm, comm_json(r)},
      {kData, data_json(r.data, s.measured_steps)},
      {kConvergence, to_json(r.convergence)},
      {kMem, memory_json(r.memory)},
      {kBackwardProfile, r.backward_profile},
      {"loss_first", s.first_loss},
      {"loss_last", s.last_loss},
      // Training ≈ 3 × forward FLOPs (forward + two backward GEMMs per layer),
      // at the batches' mean length where lengths vary (linear in length).
      {kEstTrainGflopsPerSec,
       3.0 * r.model.flops_per_sample() * s.samples_per_sec * length_share(r) / 1e9},
      // The task's unit (images, tokens, ...) per second, as the batches held them.
      {"items_per_sec", items_per_sec(r)},
      {"items_per_sample", items_per_sample(r)}};
  const double clip = r.config.options.optimizer.clip_grad_norm;
  results["grad_clip"] = clip > 0 ? nlohmann::json{{"max_norm", clip},
                                                   {"steps", r.runtime.clip_steps},
                                                   {"clipped_steps", r.runtime.clipped_steps},
                                                   {"norm_last", r.runtime.grad_norm_last},
                                                   {"norm_max", r.runtime.grad_norm_max}}
                                  : nlohmann::json();
  results[record::kNoise] = r.noise;
  // Each strategy's own section: the run's strategy's, null for the others.
  for (const std::string& key : dp::strategy_section_keys()) results[key] = nullptr;
  if (!r.strategy.key.empty()) results[r.strategy.key] = r.strategy.section;
  return results;
}

}  // namespace

nlohmann::json to_json(const TrainResult& r) {
  return {{record::kSchema, record::kTrainSchema},
          {record::kKind, record::kKindTrain},
          {record::kStatus, record::kStatusOk},
          {"argv", r.argv},
          {"started_at", r.started_at},
          {"finished_at", r.finished_at},
          {record::kInputs, inputs_json(r.config)},
          {record::kModel,
           {{record::kModelName, r.model.name},
            {"parameters", r.model.parameters},
            {"macs_per_sample", r.model.macs_per_sample},
            {record::kModelForwardFlops, r.model.flops_per_sample()},
            {"input_shape",
             r.model.inputs.empty() ? std::vector<int64_t>{} : r.model.inputs.front().shape},
            {"inputs", model_inputs_json(r.model.inputs)},
            {"num_classes", r.model.num_classes},
            {"vocab", r.model.vocab},
            {"seq_len", r.model.seq_len},
            {"hidden", r.model.hidden},
            {"family", r.model.family},
            {"file_digest", r.model.file_digest},
            {"task", r.model.task},
            {record::kModelUnit, r.model.unit.name},
            {"items_per_sample", r.model.unit.items_per_sample}}},
          {record::kEnvironment, environment_json(r)},
          {"precision",
           {{"amp", to_string(r.config.options.compute.amp)},
            {"skipped_steps", r.runtime.amp_skipped_steps},
            {"loss_scale", r.runtime.loss_scale}}},
          {record::kResults, results_json(r)},
          {"steps", steps_json(r.steps)}};
}

void print_header(std::ostream& out, const TrainResult& r) {
  const TrainOptions& o = r.config.options;
  const models::ModelFacts& m = r.model;
  const std::string shape = m.num_classes > 0 ? fmt::format(", {} classes", m.num_classes)
                            : m.vocab > 0     ? fmt::format(", vocabulary {}", m.vocab)
                                              : "";
  fmt::print(out, "dlscale train: {} ({} parameters, {:.3f} GFLOPs/sample forward), input {}{}\n", m.name,
             with_thousands(m.parameters), m.flops_per_sample() / 1e9, models::input_text(m.inputs), shape);
  fmt::print(out, "  batch {} per worker x {} worker(s) = {} global ({} scaling) | steps {} ({} warm-up) | optimizer {} lr {}\n",
             o.run.batch, r.config.world_size, r.config.global_batch,
             r.config.strong_scaling ? "strong" : "weak", o.run.steps, o.run.warmup,
             to_string(o.optimizer.kind), o.optimizer.lr);
  fmt::print(out, "  device {}{} | {} | amp {} | threads {} (BLAS {}) | LibTorch {} | BLAS {}\n",
             r.runtime.device, r.runtime.gpu.empty() ? "" : " (" + r.runtime.gpu + ")",
             to_string(o.compute.memory_format), to_string(o.compute.amp), r.runtime.compute_threads,
             r.runtime.blas_threads, r.runtime.torch_version, r.system.blas);
  const DataSummary& d = r.data;
  if (d.format == "synthetic") {
    fmt::print(out, "  data synthetic ({} distinct global batch(es) generated at start and cycled)\n",
               o.run.synthetic_batches);
  } else {
    fmt::print(out, "  data {} ({} samples, {} steps/epoch{}) | augment {} | {} data thread(s), prefetch {}{}{}\n",
               d.spec, with_thousands(d.samples), d.steps_per_epoch,
               o.data.order == data::DataOrder::kStreaming
                   ? fmt::format(", streaming: rank 0 reads {} of {} shards, shuffle buffer {}", d.shards_opened,
                                 d.shards, o.data.shuffle_buffer)
                   : "",
               d.augment, o.data.threads,
               o.data.prefetch, o.data.cache ? ", cache" : "",
               o.data.stage_dir.empty()
                   ? ""
                   : fmt::format(" | staged to {} in {:.2f} s ({:.1f} MB copied)", o.data.stage_dir,
                                 d.stage_seconds, d.staged_bytes / 1e6));
  }
  fmt::print(out, "  host {} | {} | dlscale {} ({})\n", r.system.hostname, r.system.cpu_model,
             r.system.dlscale_version, r.system.git_revision);
  for (const std::string& line : r.strategy_header) fmt::print(out, "{}\n", line);
  out.flush();
}

void print_step_line(std::ostream& out, const StepRecord& step, int64_t total_steps,
                     int64_t global_batch) {
  const double rate = step.times.total > 0 ? global_batch / step.times.total : 0.0;
  fmt::print(out, "step {:>5}/{:<5} {:>10.1f} samples/s  step {:8.2f} ms  loss {:.4f}{}\n",
             step.step + 1, total_steps, rate, ms(step.times.total), step.loss,
             step.measured ? "" : "  (warm-up)");
  out.flush();
}

namespace {

void print_comm_summary(std::ostream& out, const TrainResult& r) {
  const CommSummary& c = r.comm;
  fmt::print(out, "communication: {} {} ({}{}) over {} workers", c.backend, c.strategy, c.layout,
             c.wire_dtype == "float32" ? "" : ", " + c.wire_dtype + " on the wire",
             r.config.world_size);
  if (c.nodes > 0) fmt::print(out, " in {} node(s)", c.nodes);
  if (c.exchange == "pushes") {
    fmt::print(out, ", {} push bucket(s), {:.2f} MB/step, pushes {:.2f} ms/step", c.bucket_bytes.size(),
               c.bytes_per_step / 1e6, c.busy_ms_p50);
  } else if (c.exchange == "collectives") {
    fmt::print(out,
               ", {} bucket(s), {:.2f} MB/step, collectives {:.2f} ms/step (algbw {:.3f} GB/s, "
               "busbw {:.3f} GB/s)",
               c.bucket_bytes.size(), c.bytes_per_step / 1e6, c.busy_ms_p50, c.algbw_gbps,
               c.busbw_gbps);
  }
  fmt::print(out, "\n");
  const double tcp = max_of(c.tcp_bytes_sent);
  fmt::print(out, "bytes sent per rank per step (max over ranks): formula {:.2f} MB [{}], TCP {}\n",
             max_of(c.formula_bytes_sent) / 1e6, c.formula,
             tcp >= 0 ? fmt::format("{:.2f} MB", tcp / 1e6) : std::string("unknown"));
  fmt::print(out, "replicas: {}{}\n", c.replicas_identical ? "identical" : "differ",
             c.replicas_identical == c.replicas_should_match
                 ? ""
                 : (c.replicas_should_match ? " (WRONG: this strategy should keep them identical)"
                                            : " (unexpected for this strategy)"));
}

}  // namespace

namespace {

/// "memory per worker: ..." (the most any rank keeps, and its peak).
void print_memory_summary(std::ostream& out, const std::vector<RankMemory>& ranks) {
  if (ranks.empty()) return;
  constexpr double kMiB = 1024.0 * 1024.0;
  const MostKept most = most_kept(ranks);
  const RankMemory& m = most.figures;
  fmt::print(out,
             "memory per worker{}: parameters {:.1f} MiB, gradients {:.1f} MiB, optimizer state "
             "{:.1f} MiB (total {:.1f} MiB){}{}\n",
             ranks.size() > 1 ? " (the most any rank keeps)" : "", m.params / kMiB, m.grads / kMiB,
             m.optimizer / kMiB, most.total / kMiB,
             m.peak_rss >= 0 ? fmt::format("; peak resident {:.1f} MiB", m.peak_rss / kMiB) : "",
             m.device_peak >= 0 ? fmt::format("; GPU peak allocated {:.1f} MiB", m.device_peak / kMiB) : "");
}

}  // namespace

void print_summary(std::ostream& out, const TrainResult& r) {
  const TrainSummary& s = r.summary;
  fmt::print(out, "{}\n", std::string(78, '-'));
  fmt::print(out, "total samples/s: {:.2f}  ({} measured steps x {} samples in {:.3f} s)\n",
             s.samples_per_sec, s.measured_steps, r.config.global_batch, s.wall_seconds);
  if (r.model.unit.items_per_sample != 1) {
    const double mean = items_per_sample(r);
    fmt::print(out, "total {}/s: {:.2f}  ({} per sample{})\n", r.model.unit.name, items_per_sec(r),
               mean == std::floor(mean) ? fmt::format("{}", mean) : fmt::format("{:.2f}", mean),
               mean < static_cast<double>(r.model.unit.items_per_sample)
                   ? fmt::format(" on average, at most {}", r.model.unit.items_per_sample)
                   : "");
  }
  fmt::print(out, "per-step samples/s: {:.2f} +/- {:.2f} (jitter = {:.2f})\n", s.step_rate.mean,
             s.step_rate.uncertainty, s.step_rate.jitter);
  fmt::print(out, "step time: p50 {:.2f} ms  p95 {:.2f} ms\n", ms(s.step_time.p50),
             ms(s.step_time.p95));
  fmt::print(out, "breakdown (median ms{}):", r.config.world_size > 1 ? ", max over ranks" : "");
  for (size_t p = 0; p < kNumPhases; ++p) {
    fmt::print(out, "  {} {:.2f}", kPhaseNames[p], ms(phase_seconds(s.median_times, p)));
  }
  fmt::print(out, "\n");
  if (r.exchanged) print_comm_summary(out, r);
  for (const std::string& line : r.strategy.summary) fmt::print(out, "{}\n", line);
  if (r.noise.is_object()) {
    if (r.noise.contains("summary")) fmt::print(out, "{}\n", r.noise["summary"].get<std::string>());
    if (r.noise.contains("final"))
      fmt::print(out, "{}\n", r.noise["final"]["summary"].get<std::string>());
  }
  const data::PipelineStats& p = r.data.pipeline;
  if (p.batches > 0) {
    fmt::print(out,
               "input pipeline (rank 0): busy {:.2f} ms/batch on {} thread(s), step waited "
               "{:.2f} ms (data phase){}\n",
               ms(p.busy_seconds) / p.batches, r.config.options.data.threads,
               ms(s.median_times.data),
               p.skipped > 0 ? fmt::format(", {} corrupt sample(s) skipped", p.skipped) : "");
  }
  print_memory_summary(out, r.memory);
  if (r.config.options.optimizer.clip_grad_norm > 0) {
    fmt::print(out, "gradient clipping at norm {:g}: {} of {} steps clipped; norm last {:.4g}, max {:.4g}\n",
               r.config.options.optimizer.clip_grad_norm, r.runtime.clipped_steps, r.runtime.clip_steps,
               r.runtime.grad_norm_last, r.runtime.grad_norm_max);
  }
  fmt::print(out, "loss: {:.4f} -> {:.4f}\n", s.first_loss, s.last_loss);
  print_convergence_summary(out, r.convergence);
  out.flush();
}

}  // namespace dlscale::train
