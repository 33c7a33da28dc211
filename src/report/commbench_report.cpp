#include "report/commbench_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "core/error.h"
#include "core/stats.h"

namespace dlscale::report {
namespace {

using sweep::RunRecord;

/// Parameters that do not change what a commbench run measures.
const std::set<std::string> kCommbenchNotLabels = {
    "kind", "repeats",   "timeout",   "scaling", "command", "launcher-args",
    "op",   "min-bytes", "max-bytes", "factor",  "iters",   "warmup"};

/// Median over completed repeats of every metric.
std::map<std::string, double> median_metrics(const RunRecord& run) {
  std::map<std::string, std::vector<double>> values;
  for (const sweep::RepeatRecord& r : run.repeats) {
    if (r.status != sweep::kStatusCompleted) continue;
    for (const auto& [name, v] : r.metrics) values[name].push_back(v);
  }
  std::map<std::string, double> out;
  for (auto& [name, v] : values) out[name] = median(v);
  return out;
}

/// "busbw_gbps/allreduce/1024" -> ("allreduce", 1024); false for other names.
bool parse_busbw_name(const std::string& name, std::string& op, double& bytes) {
  const std::string prefix = "busbw_gbps/";
  if (name.rfind(prefix, 0) != 0) return false;
  const std::string rest = name.substr(prefix.size());
  const auto slash = rest.rfind('/');
  if (slash == std::string::npos) return false;
  op = rest.substr(0, slash);
  try {
    bytes = std::stod(rest.substr(slash + 1));
  } catch (const std::exception&) {
    return false;
  }
  return true;
}

/// A commbench run as the reports see it: its configuration (the parameters
/// that vary among the selected commbench runs) and its median metrics.
struct RunView {
  std::string config;  ///< " workers=2 backend=gloo", or ""
  std::map<std::string, double> medians;
};

std::vector<RunView> commbench_views(const std::vector<RunRecord>& runs) {
  std::vector<const sweep::Params*> params;
  for (const RunRecord& r : runs) {
    if (is_commbench_run(r)) params.push_back(&r.params);
  }
  const std::vector<std::string> vary = sweep::varying_params(params, kCommbenchNotLabels);
  std::vector<RunView> out;
  for (const RunRecord& r : runs) {
    if (!is_commbench_run(r)) continue;
    RunView v;
    for (const std::string& name : vary) {
      v.config += fmt::format(" {}={}", name, sweep::param_text(r.params, name, "-"));
    }
    v.medians = median_metrics(r);
    out.push_back(std::move(v));
  }
  return out;
}

std::vector<BusbwSeries> series_of(const std::vector<RunView>& views) {
  std::vector<BusbwSeries> out;
  for (const RunView& v : views) {
    std::map<std::string, BusbwSeries> by_op;  // one run may hold several operations
    std::vector<std::string> order;
    for (const auto& [name, value] : v.medians) {
      std::string op;
      double bytes = 0;
      if (!parse_busbw_name(name, op, bytes)) continue;
      if (!by_op.count(op)) order.push_back(op);
      BusbwSeries& s = by_op[op];
      s.op = op;
      s.name = op + v.config;
      s.points.emplace_back(bytes, value);
    }
    for (const std::string& op : order) {
      BusbwSeries& s = by_op[op];
      std::sort(s.points.begin(), s.points.end());
      out.push_back(std::move(s));
    }
  }
  return out;
}

Table fits_table(const std::vector<RunView>& views) {
  Table fits;
  fits.title = "Fit: time = alpha + bytes / B";
  fits.headers = {"series", "alpha (us)", "B (GB/s)"};
  fits.numeric = {false, true, true};
  for (const RunView& v : views) {
    for (const auto& [name, alpha] : v.medians) {
      if (name.rfind("alpha_us/", 0) != 0) continue;
      const std::string op = name.substr(9);
      const auto b = v.medians.find("bandwidth_gbps/" + op);
      fits.rows.push_back({{op + v.config, {}},
                           {fmt::format("{:.2f}", alpha), alpha},
                           b == v.medians.end()
                               ? Cell{"-", {}}
                               : Cell{fmt::format("{:.4f}", b->second), b->second}});
    }
  }
  return fits;
}

Table busbw_table(const std::vector<BusbwSeries>& series) {
  std::set<double> sizes;
  for (const BusbwSeries& s : series) {
    for (const auto& [b, unused] : s.points) sizes.insert(b);
  }
  Table t;
  t.title = "busbw (GB/s) by message size (bytes), median of repeats";
  t.headers = {"series"};
  t.numeric = {false};
  for (double b : sizes) {
    t.headers.push_back(fmt::format("{:.0f}", b));
    t.numeric.push_back(true);
  }
  for (const BusbwSeries& s : series) {
    std::vector<Cell> row = {{s.name, {}}};
    for (double b : sizes) {
      Cell c{"-", {}};
      for (const auto& [pb, bw] : s.points) {
        if (pb == b) c = {fmt::format("{:.3f}", bw), bw};
      }
      row.push_back(c);
    }
    t.rows.push_back(std::move(row));
  }
  return t;
}

}  // namespace

bool is_commbench_run(const RunRecord& run) {
  return sweep::param_text(run.params, "kind") == "commbench";
}

std::vector<BusbwSeries> busbw_series(const std::vector<RunRecord>& runs) {
  return series_of(commbench_views(runs));
}

Report commbench_report(const std::vector<RunRecord>& runs) {
  const std::vector<RunView> views = commbench_views(runs);
  const std::vector<BusbwSeries> series = series_of(views);
  DLSCALE_CHECK(!series.empty(),
                "no completed commbench run in the selection (sweeps with kind: commbench)");
  Report rep;
  rep.title = "Collectives (dlscale commbench): bus bandwidth by message size";
  rep.notes.push_back(
      "busbw = algbw x the operation's bus factor (allreduce 2(p-1)/p); docs/metrics.md");
  rep.tables.push_back(busbw_table(series));
  rep.data.title = rep.title;
  rep.data.headers = {"series", "op", "bytes", "busbw_gbps"};
  rep.data.numeric = {false, false, true, true};
  for (const BusbwSeries& s : series) {
    for (const auto& [b, bw] : s.points) {
      rep.data.rows.push_back({{s.name, {}},
                               {s.op, {}},
                               {fmt::format("{:.0f}", b), b},
                               {fmt::format("{:.6g}", bw), bw}});
    }
  }
  rep.tables.push_back(fits_table(views));
  return rep;
}

}  // namespace dlscale::report
