// report --type noise: the gradient noise scale each run measured
// (several averaging workers unasked, or train --noise-scale; docs/convergence.md),
// beside its global batch.
#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/error.h"
#include "core/record_keys.h"
#include "report/report_parts.h"

namespace dlscale::report {

namespace {

/// The store's metrics of results.noise, in table order.
struct NoiseMetric {
  const char* header;
  const char* metric;
  const char* format;
  bool where_measured = false;  ///< a column only where some run has the metric
};
const NoiseMetric kNoise[] = {
    {"steps measured", "noise_steps", "{:.0f}"},
    {"b_small", "noise_b_small", "{:.0f}"},
    {"b_big", "noise_b_big", "{:.0f}"},
    {"|G|^2", "noise_gradient_sq", "{:.4g}"},
    {"tr(Sigma)", "noise_trace_sigma", "{:.4g}"},
    {"B_simple", record::metric::kNoiseBSimple, "{:.4g}"},
    {"B_adam", record::metric::kNoiseAdamBSimple, "{:.4g}"},
    // At the final weights (train --noise-final).
    {"final B_simple", record::metric::kNoiseFinalBSimple, "{:.4g}", true},
    {"final B_adam", record::metric::kNoiseFinalAdamBSimple, "{:.4g}", true}};

/// At most this many points of a run's course go on the chart.
constexpr size_t kCoursePoints = 60;

/// B_simple over the steps of the first completed repeat whose record holds
/// results.noise.course, thinned to about kCoursePoints; undefined steps
/// (null) are left out.
std::vector<std::pair<double, double>> noise_course(const RunRecord& run) {
  for (const sweep::RepeatRecord& rep : run.repeats) {
    if (rep.status != sweep::kStatusCompleted || rep.record.empty()) continue;
    const nlohmann::json j = nlohmann::json::parse(rep.record, nullptr, false);
    const nlohmann::json::json_pointer at("/" + std::string(record::kResults) + "/" +
                                          record::kNoise + "/course");
    if (j.is_discarded() || !j.contains(at)) continue;
    const nlohmann::json& course = j.at(at);
    const nlohmann::json steps = course.value("step", nlohmann::json()),
                         b = course.value("b_simple", nlohmann::json());
    if (!steps.is_array() || !b.is_array() || steps.size() != b.size()) continue;
    std::vector<std::pair<double, double>> out;
    const size_t every = std::max<size_t>(1, steps.size() / kCoursePoints);
    for (size_t i = 0; i < steps.size(); ++i) {
      const bool shown = i % every == 0 || i + 1 == steps.size();
      if (shown && steps[i].is_number() && b[i].is_number())
        out.emplace_back(steps[i].get<double>(), b[i].get<double>());
    }
    return out;
  }
  return {};
}

}  // namespace

std::vector<NoiseRow> noise_rows(const std::vector<RunRecord>& runs) {
  std::vector<NoiseRow> rows;
  for (LabelledRun& r : labelled_runs(runs, "noise_b_small", {"global-batch", "batch"})) {
    NoiseRow row;
    row.labels = std::move(r.labels);
    row.workers = r.workers;
    const Params& p = r.run->params;
    row.global_batch =
        p.count("global-batch") ? static_cast<double>(sweep::param_int(p, "global-batch")) : 0;
    for (const NoiseMetric& m : kNoise) {
      row.values.push_back(
          median_metric(*r.run, m.metric).value_or(std::numeric_limits<double>::quiet_NaN()));
      if (std::string_view(m.metric) == record::metric::kNoiseBSimple)
        row.b_simple = row.values.back();
    }
    row.course = noise_course(*r.run);
    rows.push_back(std::move(row));
  }
  return rows;
}

Report noise_report(const std::vector<RunRecord>& runs) {
  const std::vector<NoiseRow> rows = noise_rows(runs);
  DLSCALE_CHECK(
      !rows.empty(),
      "no run in the selection measured the gradient noise scale (runs of several averaging "
      "workers measure it unasked; train --noise-scale requires it)");
  Report rep;
  rep.title =
      "Gradient noise scale (B_simple = tr(Sigma)/|G|^2 from gradients over b_small and b_big "
      "samples)";
  rep.notes.push_back(
      "past a global batch of about B_simple, doubling the batch buys fewer than half the steps "
      "(McCandlish et al. 2018); docs/convergence.md");
  rep.notes.push_back(
      "B_simple is empty where the |G|^2 estimate was not positive (undefined, not clamped)");
  rep.notes.push_back(
      "B_adam: the noise scale of Adam's preconditioned gradient, where the workers hold Adam's "
      "state (docs/convergence.md, \"The noise scale Adam sees\")");
  rep.notes.push_back(
      "final B_simple, final B_adam: measured at the run's final weights over its --noise-final "
      "batches, where a run did (docs/convergence.md)");
  rep.notes.push_back("values are medians of the completed repeats");
  // The final weights' columns (train --noise-final) only where a run has them.
  std::vector<size_t> shown;
  for (size_t f = 0; f < std::size(kNoise); ++f) {
    if (!kNoise[f].where_measured || std::any_of(rows.begin(), rows.end(), [f](const NoiseRow& r) {
          return std::isfinite(r.values[f]);
        }))
      shown.push_back(f);
  }
  std::vector<std::pair<std::string, std::string>> columns;
  for (size_t f : shown) columns.emplace_back(kNoise[f].header, kNoise[f].metric);
  Table t = per_run_tables(rep, rows.front().labels, {"workers", "global batch"}, columns);
  for (const NoiseRow& row : rows) {
    std::vector<Cell> cells = label_cells(row.labels, row.workers);
    cells.push_back(number(row.global_batch, "{:.0f}"));
    std::vector<Cell> data_cells = cells;
    for (size_t f : shown) {
      const double v = row.values[f];
      cells.push_back(std::isfinite(v) ? number(v, kNoise[f].format) : Cell{"", {}});
      data_cells.push_back(std::isfinite(v) ? number(v, "{:.9g}") : Cell{"", {}});
    }
    t.rows.push_back(std::move(cells));
    rep.data.rows.push_back(std::move(data_cells));
  }
  rep.tables.push_back(std::move(t));
  return rep;
}

}  // namespace dlscale::report
