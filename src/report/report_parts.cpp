#include "report/report_parts.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/record_keys.h"
#include "core/stats.h"

namespace dlscale::report {
namespace {

/// Parameters that are the table's axes or do not change what is measured.
/// With launcher cluster, `hosts` and the cluster's name follow the workers
/// (workers = hosts x workers-per-host; docs/cluster.md).
const std::set<std::string> kNotLabels = {"workers", "batch",   "global-batch",  "scaling",
                                          "repeats", "timeout", "command",       "launcher-args",
                                          "model",   "hosts",   "cluster",       "throughput-pattern"};

}  // namespace

std::string text_of(const Params& p, const std::string& name) { return sweep::param_text(p, name, "-"); }

/// Parameters (other than the axes and `exclude`) whose values differ among `runs`.
std::vector<std::string> varying(const std::vector<const RunRecord*>& runs, std::set<std::string> exclude) {
  exclude.insert(kNotLabels.begin(), kNotLabels.end());
  std::vector<const Params*> params;
  for (const RunRecord* r : runs) params.push_back(&r->params);
  return sweep::varying_params(params, exclude);
}

namespace {

/// The model's unit of a completed repeat: its items per sample (from the
/// stored rates) and the unit's name (from its record); nothing when either
/// is missing.
void take_unit(const sweep::RepeatRecord& r, Point& p) {
  const auto items = r.metrics.find(record::metric::kItemsPerSec);
  const auto sps = r.metrics.find(record::metric::kSamplesPerSec);
  if (items == r.metrics.end() || sps == r.metrics.end() || sps->second <= 0) return;
  const nlohmann::json j = nlohmann::json::parse(r.record, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("model") || !j["model"].is_object()) return;
  const nlohmann::json& unit = j["model"].value("unit", nlohmann::json());
  if (!unit.is_string()) return;
  p.unit = unit.get<std::string>();
  p.items_per_sample = items->second / sps->second;
}

}  // namespace

Point summarize_run(const RunRecord& run) {
  Point p;
  p.run = &run;
  std::vector<double> rates, steps;
  for (const sweep::RepeatRecord& r : run.repeats) {
    if (r.status != sweep::kStatusCompleted) continue;
    const auto sps = r.metrics.find(record::metric::kSamplesPerSec);
    const auto st = r.metrics.find(record::metric::kStepTimeMs);
    if (sps == r.metrics.end() || st == r.metrics.end()) continue;
    rates.push_back(sps->second);
    steps.push_back(st->second);
    if (p.unit.empty()) take_unit(r, p);
  }
  p.repeats = static_cast<int>(rates.size());
  p.status = run.status == sweep::kStatusCompleted && rates.empty() ? "no data" : run.status;
  if (!rates.empty()) {
    p.samples_per_sec = median(rates);
    p.samples_per_sec_min = *std::min_element(rates.begin(), rates.end());
    p.samples_per_sec_max = *std::max_element(rates.begin(), rates.end());
    p.step_time_ms = median(steps);
    p.step_time_min_ms = *std::min_element(steps.begin(), steps.end());
    p.step_time_max_ms = *std::max_element(steps.begin(), steps.end());
  }
  return p;
}

bool measured(const Point& p) { return p.status == sweep::kStatusCompleted && p.repeats > 0; }

/// "123.4 ±2.1%": the repeats' median and half their range relative to it
/// (the spread only with two or more repeats).
Cell median_cell(double median_value, double lo, double hi, int repeats) {
  std::string text = fmt::format("{:.1f}", median_value);
  if (repeats >= 2 && median_value > 0) text += fmt::format(" ±{:.1f}%", 100.0 * (hi - lo) / 2.0 / median_value);
  return {text, median_value};
}

Cell throughput_cell(const Point& p) {
  return median_cell(p.samples_per_sec, p.samples_per_sec_min, p.samples_per_sec_max, p.repeats);
}

Cell number(double v, const char* spec, const std::string& suffix) {
  return {fmt::format(fmt::runtime(spec), v) + suffix, v};
}

std::vector<const RunRecord*> pointers(const std::vector<RunRecord>& runs) {
  std::vector<const RunRecord*> out;
  for (const RunRecord& r : runs) out.push_back(&r);
  return out;
}

std::string batch_header(const std::string& scaling) {
  return scaling == "strong" ? "global batch" : "batch/worker";
}

void add_label_columns(Table& t, const std::vector<std::string>& names) {
  for (const std::string& n : names) {
    t.headers.push_back(n);
    t.numeric.push_back(false);
  }
}

/// True when every value of `by` comes with one value of `param` among `runs`.
bool determined_by(const std::vector<const RunRecord*>& runs, const std::string& by, const std::string& param) {
  std::map<std::string, std::string> seen;
  for (const RunRecord* r : runs) {
    const auto [it, inserted] = seen.emplace(text_of(r->params, by), text_of(r->params, param));
    if (!inserted && it->second != text_of(r->params, param)) return false;
  }
  return true;
}

std::vector<LabelledRun> labelled_runs(const std::vector<RunRecord>& runs,
                                       const std::string& metric, std::set<std::string> besides) {
  std::vector<const RunRecord*> with;
  for (const RunRecord& r : runs) {
    if (median_metric(r, metric)) with.push_back(&r);
  }
  std::vector<LabelledRun> out;
  if (with.empty()) return out;
  std::vector<std::string> labels = {"model", "strategy"};
  besides.insert({"strategy", "workers"});
  for (const std::string& v : varying(with, besides)) {
    if (!determined_by(with, "model", v)) labels.push_back(v);
  }
  for (const RunRecord* r : with) {
    LabelledRun row;
    row.run = r;
    for (const std::string& l : labels) row.labels.emplace_back(l, text_of(r->params, l));
    row.workers =
        r->params.count("workers") ? static_cast<int>(sweep::param_int(r->params, "workers")) : 1;
    out.push_back(std::move(row));
  }
  return out;
}

std::string series_name(const std::vector<std::pair<std::string, std::string>>& labels) {
  std::string name;
  for (const auto& [k, v] : labels) {
    if (v == "-") continue;  // a parameter other runs set
    // The user's own names ('_' parameters) read as themselves, as in row_name().
    name += (name.empty() ? "" : " ") +
            (k == "model" || k == "strategy" || k[0] == '_' ? v : k + "=" + v);
  }
  return name;
}

Table per_run_tables(Report& rep, const std::vector<std::pair<std::string, std::string>>& labels,
                     const std::vector<std::string>& more,
                     const std::vector<std::pair<std::string, std::string>>& figures) {
  std::vector<std::string> names;
  for (const auto& [name, unused] : labels) names.push_back(name);
  names.insert(names.end(), more.begin(), more.end());
  Table t;
  Table& d = rep.data;
  t.title = d.title = rep.title;
  add_label_columns(t, names);
  add_label_columns(d, names);
  for (const auto& [header, metric] : figures) {
    t.headers.push_back(header);
    t.numeric.push_back(true);
    d.headers.push_back(metric);
    d.numeric.push_back(true);
  }
  return t;
}

std::vector<Cell> label_cells(const std::vector<std::pair<std::string, std::string>>& labels,
                              int workers) {
  std::vector<Cell> cells;
  for (const auto& [unused, value] : labels) cells.push_back({value, {}});
  cells.push_back({std::to_string(workers), {}});
  return cells;
}

/// The median over completed repeats of `metric`, if any repeat has it.
std::optional<double> median_metric(const RunRecord& run, const std::string& metric) {
  std::vector<double> v;
  for (const sweep::RepeatRecord& r : run.repeats) {
    const auto it = r.metrics.find(metric);
    if (r.status == sweep::kStatusCompleted && it != r.metrics.end()) v.push_back(it->second);
  }
  if (v.empty()) return std::nullopt;
  return median(v);
}

Comparison compare_runs(const std::vector<RunRecord>& runs, const std::string& by,
                        const std::string& wanted_baseline) {
  Comparison c;
  c.by = by;
  std::vector<const RunRecord*> selected;
  for (const RunRecord& r : runs) {
    if (!r.params.count(by)) continue;
    selected.push_back(&r);
    const std::string v = text_of(r.params, by);
    if (std::find(c.values.begin(), c.values.end(), v) == c.values.end()) c.values.push_back(v);
  }
  DLSCALE_CHECK(c.values.size() >= 2, "--compare-by '{}': the selected runs have {} value(s) of it; need two or more",
                by, c.values.size());
  c.baseline = wanted_baseline.empty() ? c.values.front() : wanted_baseline;
  DLSCALE_CHECK(std::find(c.values.begin(), c.values.end(), c.baseline) != c.values.end(),
                "--baseline '{}' is not a value of '{}' in the selection (values: {})", c.baseline, by,
                fmt::join(c.values, ", "));
  std::stable_partition(c.values.begin(), c.values.end(), [&](const std::string& v) { return v == c.baseline; });

  // Rows: everything but the compared parameter (and what never labels).
  for (const char* fixed : {"model", "scaling", "workers", "batch/worker"}) {
    if (fixed != by && !(by == "batch" && std::string(fixed) == "batch/worker")) c.labels.emplace_back(fixed);
  }
  std::set<std::string> exclude = {by};
  // The command of an external run differs by construction; it is not a label.
  // Neither is a parameter fixed by the compared value (ranks-per-node set
  // only for strategy hierarchical): it belongs to the column, not the row.
  for (const std::string& v : varying(selected, exclude)) {
    if (v != "kind" && !determined_by(selected, by, v)) c.labels.push_back(v);
  }
  for (const RunRecord* r : selected) {
    std::vector<std::string> key;
    for (const std::string& l : c.labels) key.push_back(text_of(r->params, l == "batch/worker" ? "batch" : l));
    if (!c.grouped.count(key)) c.order.push_back(key);
    c.grouped[key][text_of(r->params, by)] = summarize_run(*r);
  }
  return c;
}

}  // namespace dlscale::report
