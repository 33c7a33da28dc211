#include "report/report_parts.h"

#include <algorithm>

#include <fmt/ranges.h>

#include "core/error.h"

namespace dlscale::report {

namespace {

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

}  // namespace

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

namespace {

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

}  // namespace

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

}  // namespace dlscale::report
