#include "libtorch/data/data_bench.h"

#include "core/clock.h"
#include "core/error.h"
#include "core/files.h"
#include "core/memory.h"
#include "core/record_keys.h"
#include "core/stats.h"
#include "core/text.h"
#include "libtorch/data/data_spec.h"

namespace dlscale::data {

namespace {

constexpr int64_t kMaxBenchSteps = 1000000;

void check(const DataBenchOptions& o) {
  check_data_options(o.data);
  DLSCALE_CHECK(parse_data_spec(o.data.spec).kind != "synthetic",
                "data bench measures a dataset on disk; --data synthetic has none");
  DLSCALE_CHECK(o.batch >= 1 && o.batch <= 65536, "--batch must be in [1, 65536] (got {})", o.batch);
  DLSCALE_CHECK(o.steps >= 1 && o.steps <= kMaxBenchSteps, "--steps must be in [1, {}] (got {})",
                kMaxBenchSteps, o.steps);
  DLSCALE_CHECK(o.warmup >= 0 && o.warmup <= kMaxBenchSteps, "--warmup must be in [0, {}] (got {})",
                kMaxBenchSteps, o.warmup);
  DLSCALE_CHECK(o.image_size >= 0 && o.image_size <= 4096, "--image-size must be in [0, 4096] (got {})",
                o.image_size);
  DLSCALE_CHECK(o.channels == 0 || o.channels == 1 || o.channels == 3,
                "--channels must be 0, 1 or 3 (got {})", o.channels);
  if (!o.json_path.empty()) check_output_path(o.json_path);
}

}  // namespace

nlohmann::json run_data_bench(const DataBenchOptions& o, std::ostream& out) {
  check(o);
  keep_freed_memory();  // as train does: batches freed on one thread, made on another
  const DataSpec spec = parse_data_spec(o.data.spec);
  const int64_t channels = o.channels > 0 ? o.channels : spec.kind == "idx" ? 1 : 3;
  const OpenedData opened = open_data(o.data, channels, Split::kTrain);
  const DatasetInfo& info = opened.dataset->info();
  SourceOptions so;
  so.global_batch = o.batch;
  so.channels = channels;
  so.image_size = o.image_size > 0 ? o.image_size : info.image_size > 0 ? info.image_size : 224;
  so.num_classes = info.num_classes;
  so.seed = o.seed;
  std::unique_ptr<DataSource> source = make_data_source(opened, o.data, so);
  out << fmt::format("data bench: {} ({} samples) | batch {} | {}x{}x{} | augment {} | {} thread(s), "
                     "prefetch {}{}\n",
                     opened.spec.text(), info.size, o.batch, channels, so.image_size, so.image_size,
                     resolve_augment(o.data, opened), o.data.threads, o.data.prefetch,
                     o.data.cache ? ", cache" : "");
  for (int64_t s = 0; s < o.warmup; ++s) source->batch(s);
  const double start = now_seconds();
  double last = start, shown = start;
  std::vector<double> rates;
  for (int64_t s = 0; s < o.steps; ++s) {
    source->batch(o.warmup + s);
    const double now = now_seconds();
    rates.push_back(static_cast<double>(o.batch) / std::max(1e-9, now - last));
    last = now;
    if (now - shown >= 1.0 && s + 1 < o.steps) {
      shown = now;
      out << fmt::format("  {}/{} batches, {:.1f} samples/s so far\n", s + 1, o.steps,
                         static_cast<double>((s + 1) * o.batch) / (now - start));
      out.flush();
    }
  }
  const double wall = now_seconds() - start;
  const double rate = static_cast<double>(o.steps * o.batch) / wall;
  const Summary per_batch = summarize(rates);
  const PipelineStats stats = source->stats();
  out << fmt::format("samples/s: {:.1f} ({} batches x {} in {:.3f} s), per-batch jitter {:.1f}, "
                     "pipeline busy {:.2f} ms/batch{}{}{}\n",
                     rate, o.steps, o.batch, wall, per_batch.jitter,
                     stats.batches > 0 ? 1e3 * stats.busy_seconds / stats.batches : 0.0,
                     stats.skipped > 0 ? fmt::format(", {} corrupt skipped", stats.skipped) : "",
                     stats.reduced_decodes > 0
                         ? fmt::format(", {} JPEGs decoded at a reduced scale", stats.reduced_decodes)
                         : "",
                     stats.region_decodes > 0
                         ? fmt::format(", {} decoded only in their crop", stats.region_decodes)
                         : "");
  nlohmann::json inputs = nlohmann::json::object();
  record_inputs(o.data, inputs);  // the data's flags, then the bench's own (their tables)
  record_inputs(o, inputs);
  inputs["augment"] = resolve_augment(o.data, opened);  // what ran, not "auto"
  inputs["image_size"] = so.image_size;
  inputs["channels"] = channels;
  nlohmann::json record = {{"schema", "dlscale.data_bench/1"},
                           {record::kInputs, inputs},
                           {"results",
                            {{"samples_per_sec", rate},
                             {"wall_s", wall},
                             {"samples", info.size},
                             {"format", info.format},
                             {"pipeline_ms_per_batch",
                              stats.batches > 0 ? 1e3 * stats.busy_seconds / stats.batches : 0.0},
                             {"skipped_corrupt", stats.skipped},
                             {"reduced_decodes", stats.reduced_decodes},
                             {"region_decodes", stats.region_decodes},
                             {"stage_s", opened.stage_seconds}}}};
  if (!o.json_path.empty()) write_file_atomic(o.json_path, dump_json(record, 2) + "\n");
  return record;
}

}  // namespace dlscale::data
