#include "report/report_parts.h"

#include <algorithm>
#include <optional>
#include <functional>

#include "core/error.h"

namespace dlscale::report {

namespace {

/// The long table: one row per measured point.
Table scaling_data(const std::vector<ScalingRow>& rows, const std::vector<std::string>& labels,
                   const std::string& title) {
  Table d;
  d.title = title;
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
  return d;
}

/// One table of the scaling report: the rows' labels, then `cell` of each
/// worker count's point (its status when it was not measured).
Table scaling_table(const std::string& title, const std::vector<ScalingRow>& rows,
                    const std::vector<std::string>& labels, const std::set<int>& worker_set,
                    const std::function<Cell(const Point&)>& cell) {
  Table t;
  t.title = title;
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
        cells.push_back(cell(it->second));
      }
    }
    t.rows.push_back(std::move(cells));
  }
  return t;
}

/// The unit a row's runs count in ("tokens"), or "" when no run says.
std::string row_unit(const ScalingRow& r) {
  for (const auto& [unused, p] : r.points) {
    if (!p.unit.empty()) return p.unit;
  }
  return "";
}

/// Throughput in each model's own unit (tokens/s for the sequence models),
/// when some row counts something other than samples: a column says which.
std::optional<Table> unit_table(const std::vector<ScalingRow>& rows, std::vector<std::string> labels,
                                const std::set<int>& worker_set) {
  const bool other = std::any_of(rows.begin(), rows.end(), [](const ScalingRow& r) {
    const std::string u = row_unit(r);
    return !u.empty() && u != "samples" && u != "images";
  });
  if (!other) return std::nullopt;
  std::vector<ScalingRow> with_unit = rows;
  for (ScalingRow& r : with_unit) {
    const std::string u = row_unit(r);
    r.labels.emplace_back("unit", u.empty() ? "-" : u);
  }
  labels.push_back("unit");
  return scaling_table("Throughput in the model's unit (items/s)", with_unit, labels, worker_set, [](const Point& p) {
    if (p.items_per_sample <= 0) return Cell{"-", {}};
    const double k = p.items_per_sample;
    return median_cell(k * p.samples_per_sec, k * p.samples_per_sec_min, k * p.samples_per_sec_max, p.repeats);
  });
}

}  // namespace

Report scaling_report(const std::vector<RunRecord>& runs, const std::string& scaling) {
  const std::vector<ScalingRow> rows = scaling_rows(runs, scaling);
  DLSCALE_CHECK(!rows.empty(), "no {}-scaling runs in the selection (the report needs runs with scaling: {})",
                scaling, scaling);
  Report rep;
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
    rep.tables.push_back(scaling_table(m.title, rows, labels, worker_set, m.cell));
  }
  if (const auto units = unit_table(rows, labels, worker_set)) rep.tables.push_back(*units);

  rep.data = scaling_data(rows, labels, rep.title);
  return rep;
}

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

}  // namespace dlscale::report
