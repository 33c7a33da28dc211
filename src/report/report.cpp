#include "report/report.h"

#include "report/commbench_report.h"
#include "report/tta_report.h"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "core/enum_names.h"
#include "core/error.h"
#include "core/stats.h"
#include <fmt/ranges.h>

namespace dlscale::report {
namespace {

using sweep::Params;
using sweep::RunRecord;

constexpr EnumNames<ReportType, 7> kTypeNames{"report type", {{{ReportType::kWeak, "weak"},
                                                 {ReportType::kStrong, "strong"},
                                                 {ReportType::kBreakdown, "breakdown"},
                                                 {ReportType::kCompare, "compare"},
                                                 {ReportType::kCommbench, "commbench"},
                                                 {ReportType::kIo, "io"},
                                                 {ReportType::kTta, "tta"}}}};
constexpr EnumNames<Format, 4> kFormatNames{
    "format", {{{Format::kText, "text"}, {Format::kMarkdown, "markdown"}, {Format::kCsv, "csv"}, {Format::kJson, "json"}}}};

/// Parameters that are the table's axes or do not change what is measured.
/// With launcher cluster, `hosts` and the cluster's name follow the workers
/// (workers = hosts x workers-per-host; docs/cluster.md).
const std::set<std::string> kNotLabels = {"workers", "batch",   "global-batch",  "scaling",
                                          "repeats", "timeout", "command",       "launcher-args",
                                          "model",   "hosts",   "cluster",       "throughput-pattern"};

std::string text_of(const Params& p, const std::string& name) { return sweep::param_text(p, name, "-"); }

/// Parameters (other than the axes and `exclude`) whose values differ among `runs`.
std::vector<std::string> varying(const std::vector<const RunRecord*>& runs, std::set<std::string> exclude) {
  exclude.insert(kNotLabels.begin(), kNotLabels.end());
  std::vector<const Params*> params;
  for (const RunRecord* r : runs) params.push_back(&r->params);
  return sweep::varying_params(params, exclude);
}

Point summarize_run(const RunRecord& run) {
  Point p;
  p.run = &run;
  std::vector<double> rates, steps;
  for (const sweep::RepeatRecord& r : run.repeats) {
    if (r.status != sweep::kStatusCompleted) continue;
    const auto sps = r.metrics.find("samples_per_sec");
    const auto st = r.metrics.find("step_time_ms");
    if (sps == r.metrics.end() || st == r.metrics.end()) continue;
    rates.push_back(sps->second);
    steps.push_back(st->second);
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

Cell number(double v, const char* spec, const std::string& suffix = "") {
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

Report scaling_report(const std::vector<RunRecord>& runs, const std::string& scaling) {
  const std::vector<ScalingRow> rows = scaling_rows(runs, scaling);
  DLSCALE_CHECK(!rows.empty(), "no {}-scaling runs in the selection (the report needs runs with scaling: {})",
                scaling, scaling);
  Report rep;
  rep.type = scaling == "weak" ? ReportType::kWeak : ReportType::kStrong;
  rep.title = scaling == "weak" ? "Weak scaling (per-worker batch fixed)" : "Strong scaling (global batch fixed)";
  rep.notes.push_back(scaling == "weak"
                          ? "efficiency = t1 / tN x 100% (t = step time); speedup = throughput(N) / throughput(1)"
                          : "efficiency = t1 / (N x tN) x 100% (t = step time); speedup = throughput(N) / "
                            "throughput(1)");
  rep.notes.push_back("values are medians of the completed repeats; +/-x% is half their range");

  std::set<int> worker_set;
  for (const ScalingRow& r : rows) {
    for (const auto& [w, unused] : r.points) worker_set.insert(w);
  }
  std::vector<std::string> labels;
  for (const auto& [name, unused] : rows.front().labels) labels.push_back(name);

  struct Metric {
    const char* title;
    std::function<Cell(const Point&)> cell;
  };
  const std::vector<Metric> metrics = {
      {"Step time (ms)",
       [](const Point& p) { return median_cell(p.step_time_ms, p.step_time_min_ms, p.step_time_max_ms, p.repeats); }},
      {"Throughput (samples/s)", throughput_cell},
      {"Speedup", [](const Point& p) { return p.has_speedup ? number(p.speedup, "{:.2f}") : Cell{"-", {}}; }},
      {"Efficiency (%)",
       [](const Point& p) { return p.has_speedup ? number(p.efficiency_pct, "{:.1f}") : Cell{"-", {}}; }},
  };
  for (const Metric& m : metrics) {
    Table t;
    t.title = m.title;
    add_label_columns(t, labels);
    for (int w : worker_set) {
      t.headers.push_back(fmt::format("{} worker{}", w, w == 1 ? "" : "s"));
      t.numeric.push_back(true);
    }
    for (const ScalingRow& r : rows) {
      std::vector<Cell> cells;
      for (const auto& [unused, value] : r.labels) cells.push_back({value, {}});
      for (int w : worker_set) {
        const auto it = std::find_if(r.points.begin(), r.points.end(), [&](const auto& pw) { return pw.first == w; });
        if (it == r.points.end()) {
          cells.push_back({"", {}});
        } else if (!measured(it->second)) {
          cells.push_back({it->second.status, {}});
        } else {
          cells.push_back(m.cell(it->second));
        }
      }
      t.rows.push_back(std::move(cells));
    }
    rep.tables.push_back(std::move(t));
  }

  Table& d = rep.data;
  d.title = rep.title;
  add_label_columns(d, labels);
  const std::vector<std::string> numeric = {"workers",      "global_batch",     "step_time_ms",       "step_time_min_ms",
                                            "step_time_max_ms", "samples_per_sec", "samples_per_sec_min",
                                            "samples_per_sec_max", "speedup",     "efficiency_pct",     "repeats"};
  for (const std::string& n : numeric) {
    d.headers.push_back(n);
    d.numeric.push_back(true);
  }
  d.headers.push_back("status");
  d.numeric.push_back(false);
  for (const ScalingRow& r : rows) {
    for (const auto& [w, p] : r.points) {
      std::vector<Cell> cells;
      for (const auto& [unused, value] : r.labels) cells.push_back({value, {}});
      const bool ok = measured(p);
      auto num = [&](double v, bool present) { return present ? number(v, "{:.6g}") : Cell{"", {}}; };
      cells.push_back(number(w, "{:.0f}"));
      cells.push_back(number(static_cast<double>(sweep::param_int(p.run->params, "global-batch")), "{:.0f}"));
      for (double v : {p.step_time_ms, p.step_time_min_ms, p.step_time_max_ms, p.samples_per_sec,
                       p.samples_per_sec_min, p.samples_per_sec_max}) {
        cells.push_back(num(v, ok));
      }
      cells.push_back(num(p.speedup, ok && p.has_speedup));
      cells.push_back(num(p.efficiency_pct, ok && p.has_speedup));
      cells.push_back(number(p.repeats, "{:.0f}"));
      cells.push_back({p.status, {}});
      d.rows.push_back(std::move(cells));
    }
  }
  return rep;
}

const std::vector<std::string> kPhases = {"data", "forward", "backward", "comm", "optimizer"};

Report breakdown_report(const std::vector<RunRecord>& runs) {
  Report rep;
  rep.type = ReportType::kBreakdown;
  rep.title = "Step-time breakdown (median ms per step, share of the step)";
  rep.notes.push_back("comm is the communication not hidden behind the backward pass (max over ranks)");
  std::vector<const RunRecord*> with;
  for (const RunRecord& r : runs) {
    for (const sweep::RepeatRecord& rep_rec : r.repeats) {
      if (rep_rec.metrics.count("breakdown_total_ms")) {
        with.push_back(&r);
        break;
      }
    }
  }
  DLSCALE_CHECK(!with.empty(), "no run in the selection has a step-time breakdown (only dlscale runs record one)");
  std::vector<std::string> labels = {"model", "scaling", "workers", "batch/worker"};
  const std::vector<std::string> extra = varying(with, {});
  labels.insert(labels.end(), extra.begin(), extra.end());
  Table t;
  t.title = rep.title;
  add_label_columns(t, labels);
  for (const std::string& ph : kPhases) {
    t.headers.push_back(ph);
    t.numeric.push_back(true);
  }
  t.headers.push_back("total");
  t.numeric.push_back(true);
  Table& d = rep.data;
  d.title = rep.title;
  add_label_columns(d, labels);
  for (const std::string& ph : kPhases) {
    d.headers.push_back(ph + "_ms");
    d.numeric.push_back(true);
    d.headers.push_back(ph + "_pct");
    d.numeric.push_back(true);
  }
  d.headers.push_back("total_ms");
  d.numeric.push_back(true);
  for (const RunRecord* r : with) {
    std::map<std::string, std::vector<double>> values;
    for (const sweep::RepeatRecord& rr : r->repeats) {
      if (rr.status != sweep::kStatusCompleted) continue;
      for (const auto& [name, v] : rr.metrics) values[name].push_back(v);
    }
    std::vector<Cell> cells, data_cells;
    for (const std::string& l : labels) {
      const std::string name = l == "batch/worker" ? "batch" : l;
      cells.push_back({text_of(r->params, name), {}});
    }
    data_cells = cells;
    const double total = median(values["breakdown_total_ms"]);
    for (const std::string& ph : kPhases) {
      const double ms = median(values["breakdown_" + ph + "_ms"]);
      const double pct = total > 0 ? 100.0 * ms / total : 0;
      cells.push_back({fmt::format("{:.2f} ({:.0f}%)", ms, pct), ms});
      data_cells.push_back(number(ms, "{:.6g}"));
      data_cells.push_back(number(pct, "{:.4g}"));
    }
    cells.push_back(number(total, "{:.2f}"));
    data_cells.push_back(number(total, "{:.6g}"));
    t.rows.push_back(std::move(cells));
    d.rows.push_back(std::move(data_cells));
  }
  rep.tables.push_back(std::move(t));
  return rep;
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

/// Compare report: the parameter server's side of each configuration that
/// used it (the busiest shard is the bottleneck; docs/strategies.md).
Table ps_table(const std::vector<std::vector<std::string>>& order,
               const std::map<std::vector<std::string>, std::map<std::string, Point>>& grouped,
               const std::vector<std::string>& labels, const std::vector<std::string>& values,
               const std::string& by) {
  Table t;
  t.title = "Parameter server (medians of repeats; the busiest shard)";
  add_label_columns(t, labels);
  t.headers.push_back(by);
  t.numeric.push_back(false);
  struct Column {
    const char* header;
    const char* metric;
    const char* format;
    double scale = 1;  // the metric's unit over the column's
  };
  const std::vector<Column> columns = {{"shards", "ps_shards", "{:.0f}"},
                                       {"shard MB in/step", "ps_shard_bytes_in_per_step_max", "{:.2f}", 1e-6},
                                       {"shard busy ms/step", "ps_shard_busy_ms_per_step_max", "{:.2f}"},
                                       {"imbalance", "ps_imbalance", "{:.2f}"},
                                       {"staleness mean", "ps_staleness_mean", "{:.2f}"},
                                       {"staleness max", "ps_staleness_max", "{:.0f}"}};
  t.headers.push_back("samples/s");  // the run's own median, as in the throughput table
  t.numeric.push_back(true);
  for (const Column& c : columns) {
    t.headers.push_back(c.header);
    t.numeric.push_back(true);
  }
  for (const auto& key : order) {
    for (const std::string& v : values) {
      const auto it = grouped.at(key).find(v);
      if (it == grouped.at(key).end() || !measured(it->second)) continue;
      if (!median_metric(*it->second.run, "ps_shards")) continue;
      std::vector<Cell> row;
      for (const std::string& k : key) row.push_back({k, {}});
      row.push_back({v, {}});
      row.push_back(number(it->second.samples_per_sec, "{:.1f}"));
      for (const Column& c : columns) {
        const std::optional<double> x = median_metric(*it->second.run, c.metric);
        row.push_back(x ? number(*x * c.scale, c.format) : Cell{"", {}});
      }
      t.rows.push_back(std::move(row));
    }
  }
  return t;
}

/// Runs grouped for a side-by-side comparison: one row per configuration
/// (everything but `by`), one entry per value of `by`.
struct Comparison {
  std::string by;
  std::string baseline;
  std::vector<std::string> values;  ///< the baseline first
  std::vector<std::string> labels;  ///< the row label columns
  std::vector<std::vector<std::string>> order;
  std::map<std::vector<std::string>, std::map<std::string, Point>> grouped;
};

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

Report compare_report(const std::vector<RunRecord>& runs, const ReportOptions& o) {
  const std::string by_param = o.compare_by.empty() ? detect_compare_by(runs) : o.compare_by;
  DLSCALE_CHECK(!by_param.empty(), "nothing to compare: no parameter among kind, backend, strategy, launcher or _name "
                                   "takes two values (name one with --compare-by)");
  Comparison c = compare_runs(runs, by_param, o.baseline);
  const std::string& by = c.by;
  const std::string& baseline = c.baseline;
  const std::vector<std::string>& values = c.values;
  const std::vector<std::string>& labels = c.labels;
  const auto& order = c.order;
  auto& grouped = c.grouped;
  Report rep;
  rep.type = ReportType::kCompare;
  rep.title = fmt::format("Comparison by {} (throughput, samples/s; ratio = value / {})", by, baseline);
  rep.notes.push_back("values are medians of the completed repeats");
  Table t;
  t.title = rep.title;
  add_label_columns(t, labels);
  for (const std::string& v : values) {
    t.headers.push_back(v);
    t.numeric.push_back(true);
  }
  for (std::size_t i = 1; i < values.size(); ++i) {
    t.headers.push_back(values[i] + " / " + baseline);
    t.numeric.push_back(true);
  }
  Table& d = rep.data;
  d.title = rep.title;
  add_label_columns(d, labels);
  for (const char* h : {"value", "samples_per_sec", "ratio_to_baseline", "repeats"}) {
    d.headers.push_back(h);
    d.numeric.push_back(std::string(h) != "value");
  }
  d.headers.push_back("status");
  d.numeric.push_back(false);
  for (const auto& key : order) {
    const auto& by_value = grouped[key];
    std::vector<Cell> cells;
    for (const std::string& k : key) cells.push_back({k, {}});
    const auto base = by_value.find(baseline);
    const bool base_ok = base != by_value.end() && measured(base->second);
    for (const std::string& v : values) {
      const auto it = by_value.find(v);
      if (it == by_value.end()) {
        cells.push_back({"", {}});
      } else if (!measured(it->second)) {
        cells.push_back({it->second.status, {}});
      } else {
        cells.push_back(throughput_cell(it->second));
      }
      if (it != by_value.end()) {
        std::vector<Cell> row;
        for (const std::string& k : key) row.push_back({k, {}});
        const bool ok = measured(it->second);
        row.push_back({v, {}});
        row.push_back(ok ? number(it->second.samples_per_sec, "{:.6g}") : Cell{"", {}});
        row.push_back(ok && base_ok ? number(it->second.samples_per_sec / base->second.samples_per_sec, "{:.4f}")
                                    : Cell{"", {}});
        row.push_back(number(it->second.repeats, "{:.0f}"));
        row.push_back({it->second.status, {}});
        d.rows.push_back(std::move(row));
      }
    }
    for (std::size_t i = 1; i < values.size(); ++i) {
      const auto it = by_value.find(values[i]);
      if (base_ok && it != by_value.end() && measured(it->second)) {
        cells.push_back(number(it->second.samples_per_sec / base->second.samples_per_sec, "{:.3f}"));
      } else {
        cells.push_back({"-", {}});
      }
    }
    t.rows.push_back(std::move(cells));
  }
  rep.tables.push_back(std::move(t));
  if (Table ps = ps_table(order, grouped, labels, values, by); !ps.rows.empty()) {
    rep.tables.push_back(std::move(ps));
  }
  return rep;
}

/// The I/O overhead (docs/data.md): runs that differ only in `data`, each
/// real source against synthetic data, as the CSCS study reports it.
Report io_report(const std::vector<RunRecord>& runs) {
  std::vector<std::string> values;
  for (const RunRecord& r : runs) {
    const std::string v = r.params.count("data") ? text_of(r.params, "data") : "";
    if (!v.empty() && std::find(values.begin(), values.end(), v) == values.end()) values.push_back(v);
  }
  DLSCALE_CHECK(values.size() >= 2 && std::find(values.begin(), values.end(), "synthetic") != values.end(),
                "--type io needs runs that differ in the parameter 'data', one of them synthetic "
                "(values in the selection: {})",
                values.empty() ? std::string("none") : fmt::format("{}", fmt::join(values, ", ")));
  const Comparison c = compare_runs(runs, "data", "synthetic");
  Report rep;
  rep.type = ReportType::kIo;
  rep.title = "I/O overhead (samples/s; overhead = 1 - real / synthetic)";
  rep.notes.push_back("overhead = (samples/s synthetic - samples/s real) / samples/s synthetic x 100%");
  rep.notes.push_back("data ms = median time a step waited for its batch; pipeline ms = time to build one batch");
  rep.notes.push_back("values are medians of the completed repeats");
  Table t;
  t.title = rep.title;
  add_label_columns(t, c.labels);
  t.headers.push_back("synthetic");
  t.numeric.push_back(true);
  for (std::size_t i = 1; i < c.values.size(); ++i) {
    for (const std::string h : {"", " overhead %", " data ms", " pipeline ms"}) {
      t.headers.push_back(c.values[i] + h);
      t.numeric.push_back(true);
    }
  }
  Table& d = rep.data;
  d.title = rep.title;
  add_label_columns(d, c.labels);
  for (const char* h : {"data", "samples_per_sec", "overhead_pct", "data_wait_ms", "pipeline_ms_per_batch",
                        "repeats", "status"}) {
    d.headers.push_back(h);
    d.numeric.push_back(std::string(h) != "data" && std::string(h) != "status");
  }
  for (const auto& key : c.order) {
    const auto& by_value = c.grouped.at(key);
    const auto base = by_value.find("synthetic");
    const bool base_ok = base != by_value.end() && measured(base->second);
    std::vector<Cell> cells;
    for (const std::string& k : key) cells.push_back({k, {}});
    cells.push_back(base == by_value.end() ? Cell{"", {}}
                                           : base_ok ? throughput_cell(base->second) : Cell{base->second.status, {}});
    for (const std::string& v : c.values) {
      const auto it = by_value.find(v);
      const bool ok = it != by_value.end() && measured(it->second);
      std::optional<double> overhead, wait, pipeline;
      if (ok) {
        if (base_ok) overhead = 100.0 * (1.0 - it->second.samples_per_sec / base->second.samples_per_sec);
        wait = median_metric(*it->second.run, "breakdown_data_ms");
        pipeline = median_metric(*it->second.run, "data_pipeline_ms_per_batch");
      }
      auto opt = [](const std::optional<double>& x, const char* f) { return x ? number(*x, f) : Cell{"", {}}; };
      if (v != "synthetic") {
        cells.push_back(ok ? throughput_cell(it->second)
                           : Cell{it == by_value.end() ? "" : it->second.status, {}});
        cells.push_back(opt(overhead, "{:.1f}"));
        cells.push_back(opt(wait, "{:.2f}"));
        cells.push_back(opt(pipeline, "{:.2f}"));
      }
      if (it == by_value.end()) continue;
      std::vector<Cell> row;
      for (const std::string& k : key) row.push_back({k, {}});
      row.push_back({v, {}});
      row.push_back(ok ? number(it->second.samples_per_sec, "{:.6g}") : Cell{"", {}});
      row.push_back(opt(overhead, "{:.4f}"));
      row.push_back(opt(wait, "{:.4f}"));
      row.push_back(opt(pipeline, "{:.4f}"));
      row.push_back(number(it->second.repeats, "{:.0f}"));
      row.push_back({it->second.status, {}});
      d.rows.push_back(std::move(row));
    }
    t.rows.push_back(std::move(cells));
  }
  rep.tables.push_back(std::move(t));
  return rep;
}

}  // namespace

std::vector<ScalingRow> scaling_rows(const std::vector<RunRecord>& runs, const std::string& scaling) {
  std::vector<const RunRecord*> selected;
  for (const RunRecord& r : runs) {
    if (text_of(r.params, "scaling") == scaling && r.params.count("batch")) selected.push_back(&r);
  }
  if (selected.empty()) return {};
  const std::vector<std::string> extra = varying(selected, {});
  const std::string batch_param = scaling == "strong" ? "global-batch" : "batch";
  std::vector<ScalingRow> rows;
  std::map<std::vector<std::string>, std::size_t> index;
  for (const RunRecord* r : selected) {
    std::vector<std::pair<std::string, std::string>> labels = {{"model", text_of(r->params, "model")},
                                                               {batch_header(scaling), text_of(r->params, batch_param)}};
    for (const std::string& e : extra) labels.emplace_back(e, text_of(r->params, e));
    std::vector<std::string> key;
    for (const auto& [unused, v] : labels) key.push_back(v);
    auto [it, inserted] = index.emplace(key, rows.size());
    if (inserted) rows.push_back({labels, {}});
    ScalingRow& row = rows[it->second];
    const int w = static_cast<int>(sweep::param_int(r->params, "workers"));
    auto same = std::find_if(row.points.begin(), row.points.end(), [&](const auto& p) { return p.first == w; });
    const Point p = summarize_run(*r);
    if (same == row.points.end()) {
      row.points.emplace_back(w, p);
    } else if (!measured(same->second) && measured(p)) {
      same->second = p;  // the same configuration stored twice (two sweeps): keep the measured one
    }
  }
  for (ScalingRow& row : rows) {
    std::sort(row.points.begin(), row.points.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    const auto base = std::find_if(row.points.begin(), row.points.end(), [](const auto& p) { return measured(p.second); });
    if (base == row.points.end()) continue;
    const int base_workers = base->first;
    const double base_sps = base->second.samples_per_sec;
    for (auto& [w, p] : row.points) {
      if (!measured(p)) continue;
      p.has_speedup = true;
      p.base_workers = base_workers;
      p.speedup = p.samples_per_sec / base_sps;
      p.efficiency_pct = 100.0 * p.speedup * base_workers / w;
    }
  }
  return rows;
}

/// Whether the runs that set `name` give it two or more values (a parameter
/// set on only some runs "varies" against its absence, but a comparison
/// takes only the runs that set it).
bool comparable(const std::vector<RunRecord>& runs, const std::string& name) {
  std::set<std::string> values;
  for (const RunRecord& r : runs) {
    if (r.params.count(name)) values.insert(text_of(r.params, name));
  }
  return values.size() >= 2;
}

std::string detect_compare_by(const std::vector<RunRecord>& runs) {
  const std::vector<const RunRecord*> all = pointers(runs);
  std::vector<std::string> vary = all.empty() ? std::vector<std::string>{} : varying(all, {});
  vary.erase(std::remove_if(vary.begin(), vary.end(), [&](const std::string& v) { return !comparable(runs, v); }),
             vary.end());
  for (const char* preferred : {"kind", "backend", "strategy", "launcher"}) {
    if (std::find(vary.begin(), vary.end(), preferred) != vary.end()) {
      // `kind` varies alongside a '_' tool name in the peer examples; the name reads better.
      if (std::string(preferred) == "kind") {
        for (const std::string& v : vary) {
          if (v[0] == '_') return v;
        }
      }
      return preferred;
    }
  }
  for (const std::string& v : vary) {
    if (v[0] == '_') return v;
  }
  return "";
}

Report build_report(const std::vector<RunRecord>& all, const ReportOptions& o) {
  DLSCALE_CHECK(!all.empty(), "no runs in the selection");
  if (o.type == ReportType::kCommbench) return commbench_report(all);
  // Collective benchmarks have no throughput or step time: not scaling data.
  std::vector<RunRecord> runs;
  for (const RunRecord& r : all) {
    if (!is_commbench_run(r)) runs.push_back(r);
  }
  DLSCALE_CHECK(!runs.empty(), "the selection holds only commbench runs; use --type commbench");
  switch (o.type) {
    case ReportType::kWeak:
      return scaling_report(runs, "weak");
    case ReportType::kStrong:
      return scaling_report(runs, "strong");
    case ReportType::kBreakdown:
      return breakdown_report(runs);
    case ReportType::kCompare:
      return compare_report(runs, o);
    case ReportType::kIo:
      return io_report(runs);
    case ReportType::kTta:
      return tta_report(runs);
    case ReportType::kCommbench:
      break;
  }
  throw InternalError("unknown report type");
}

std::vector<RunRecord> filter_runs(std::vector<RunRecord> runs, const std::string& where) {
  if (where.empty()) return runs;
  const sweep::Expression expr = sweep::Expression::parse(where);
  std::vector<RunRecord> out;
  for (RunRecord& r : runs) {
    const sweep::Lookup lookup = [&](const std::string& name) -> sweep::Value {
      const auto it = r.params.find(name);
      if (it != r.params.end()) return it->second;
      if (name == "status") return sweep::Value(r.status);
      if (name == "sweep") return sweep::Value(r.sweep);
      throw Error(fmt::format("--where: run {} has no parameter '{}'", r.id, name));
    };
    if (expr.evaluate(lookup).truthy()) out.push_back(std::move(r));
  }
  return out;
}

ReportType parse_report_type(const std::string& s) { return kTypeNames.parse(s); }
Format parse_format(const std::string& s) { return kFormatNames.parse(s); }

}  // namespace dlscale::report
