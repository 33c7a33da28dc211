#include "report/report_parts.h"

#include <algorithm>

#include <fmt/ranges.h>

#include "core/error.h"
#include "core/record_keys.h"

namespace dlscale::report {

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
        wait = median_metric(*it->second.run, record::metric::kBreakdownDataMs);
        pipeline = median_metric(*it->second.run, std::string(record::metric::kDataPrefix) + "pipeline_ms_per_batch");
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

}  // namespace dlscale::report
