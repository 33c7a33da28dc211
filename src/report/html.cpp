#include "report/html.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "core/text.h"
#include "core/error.h"
#include "core/record_keys.h"
#include "core/stats.h"
#include "report/commbench_report.h"
#include "report/report.h"
#include "report/report_parts.h"
#include "report/svg_chart.h"
#include "report/tta_report.h"

namespace dlscale::report {
namespace {

/// A short legend name: "resnet18 b32 ddp image-size=32". `kind` is left
/// out when a '_' parameter (the user's own name for the tool) is shown.
std::string row_name(const ScalingRow& r) {
  bool has_own = false;
  for (const auto& [k, v] : r.labels) has_own = has_own || k[0] == '_';
  std::string s;
  for (const auto& [k, v] : r.labels) {
    if (k == "kind" && has_own) continue;
    if (!s.empty()) s += " ";
    if (k == "model" || k[0] == '_') {
      s += v;
    } else if (k == "batch/worker" || k == "global batch") {
      s += "b" + v;
    } else {
      s += k + "=" + v;
    }
  }
  return s;
}

std::string scaling_charts(const std::vector<ScalingRow>& rows) {
  std::set<double> xs_set;
  for (const ScalingRow& r : rows) {
    for (const auto& [w, unused] : r.points) xs_set.insert(w);
  }
  const std::vector<double> xs(xs_set.begin(), xs_set.end());
  std::vector<Series> tput, eff;
  int color = 0;
  for (const ScalingRow& r : rows) {
    Series s{row_name(r), {}, color, false};
    Series ideal{row_name(r) + " ideal", {}, color, true};
    Series e{row_name(r), {}, color, false};
    for (const auto& [w, p] : r.points) {
      if (!p.has_speedup) continue;
      s.points.emplace_back(w, p.samples_per_sec);
      e.points.emplace_back(w, p.efficiency_pct);
      ideal.points.emplace_back(w, p.samples_per_sec / p.speedup * w / p.base_workers);
    }
    ++color;
    if (s.points.empty()) continue;
    tput.push_back(s);
    tput.push_back(ideal);
    eff.push_back(e);
  }
  return chart_row({line_chart("Throughput vs workers (dashed: ideal scaling)", "samples/s", xs, tput, 0),
                    line_chart("Scaling efficiency vs workers", "efficiency (%)", xs, eff, 100)});
}

/// Memory per worker against workers, one line per configuration (model,
/// strategy, what else varies): accounted total and peak resident set.
std::string memory_charts(const std::vector<MemoryRow>& rows) {
  // On a GPU the peak that matters is the device's, not the host process's.
  const bool gpu = any_device_peak(rows);
  const MemoryRow::Figure peak_figure = gpu ? MemoryRow::kDevicePeak : MemoryRow::kPeakRss;
  std::set<double> xs_set;
  std::map<std::string, std::pair<Series, Series>> by_name;  // accounted, peak
  std::vector<std::string> order;
  for (const MemoryRow& r : rows) {
    const std::string name = series_name(r.labels);
    auto [it, added] = by_name.try_emplace(name);
    if (added) {
      const int color = static_cast<int>(order.size());
      it->second = {Series{name, {}, color, false}, Series{name, {}, color, false}};
      order.push_back(name);
    }
    xs_set.insert(r.workers);
    const double total_mib = r.mib[MemoryRow::kTotal], peak_mib = r.mib[peak_figure];
    if (total_mib >= 0) it->second.first.points.emplace_back(r.workers, total_mib);
    if (peak_mib >= 0) it->second.second.points.emplace_back(r.workers, peak_mib);
  }
  std::vector<Series> accounted, peak;
  for (const std::string& name : order) {
    auto& [a, p] = by_name.at(name);
    for (Series* s : {&a, &p}) std::sort(s->points.begin(), s->points.end());
    accounted.push_back(a);
    peak.push_back(p);
  }
  const std::vector<double> xs(xs_set.begin(), xs_set.end());
  return chart_row({line_chart("Parameters + gradients + optimizer state per worker", "MiB", xs, accounted, 0),
                    line_chart(gpu ? "Peak GPU memory allocated per worker" : "Peak resident set per worker",
                               "MiB", xs, peak, 0)});
}

/// B_simple against the global batch, one line per configuration, with the
/// batch itself dashed: where a line lies below it, larger batches buy
/// fewer than proportionally fewer steps.
std::string noise_chart(const std::vector<NoiseRow>& rows) {
  std::set<double> xs_set;
  std::map<std::string, Series> by_name;
  std::vector<std::string> order;
  for (const NoiseRow& r : rows) {
    const double b = r.b_simple;
    if (!std::isfinite(b) || r.global_batch <= 0) continue;
    const std::string name = series_name(r.labels);
    auto [it, added] =
        by_name.try_emplace(name, Series{name, {}, static_cast<int>(order.size()), false});
    if (added) order.push_back(name);
    it->second.points.emplace_back(r.global_batch, b);
    xs_set.insert(r.global_batch);
  }
  if (order.empty()) return "";
  std::vector<Series> series;
  for (const std::string& name : order) {
    Series s = by_name.at(name);
    std::sort(s.points.begin(), s.points.end());
    series.push_back(std::move(s));
  }
  const std::vector<double> xs(xs_set.begin(), xs_set.end());
  Series batch{"global batch", {}, static_cast<int>(order.size()), true};
  for (double x : xs) batch.points.emplace_back(x, x);
  series.push_back(std::move(batch));
  std::vector<std::string> charts = {line_chart(
      "Gradient noise scale vs global batch (dashed: the batch)", "B_simple", xs, series, 0)};
  // Its course over training, one line per run (the estimate's moving
  // average), on a log axis: where the |G|^2 estimate nears 0 it spikes by
  // orders of magnitude. Negative estimates stay in the record, off the chart.
  std::vector<Series> course;
  for (const NoiseRow& r : rows) {
    if (r.course.empty()) continue;
    course.push_back(
        Series{fmt::format("{} {} workers b{:g}", series_name(r.labels), r.workers, r.global_batch),
               r.course, static_cast<int>(course.size()), false});
  }
  if (!course.empty()) {
    charts.push_back(line_chart("Gradient noise scale during training", "B_simple", {}, course, 0,
                                XAxis{"step", tick_label, true}, 0, true));
  }
  return chart_row(charts);
}

/// Steps to target against the global batch, log-log, one line per
/// configuration with its fitted model dashed in the same colour.
std::string batch_chart(const std::vector<BatchStudy>& studies) {
  std::set<double> xs_set;
  std::vector<Series> series;
  for (const BatchStudy& s : studies) {
    const int color = static_cast<int>(series.size());
    Series measured{series_name(s.labels), {}, color, false};
    Series fitted{"fit", {}, color, true};
    for (const BatchPoint& p : s.points) {
      if (p.steps) measured.points.emplace_back(p.global_batch, *p.steps);
      if (s.fit.ok) fitted.points.emplace_back(p.global_batch, s.fit.model.steps(p.global_batch));
      xs_set.insert(p.global_batch);
    }
    if (measured.points.empty()) continue;
    series.push_back(std::move(measured));
    if (!fitted.points.empty()) series.push_back(std::move(fitted));
  }
  if (series.empty()) return "";
  const std::vector<double> xs(xs_set.begin(), xs_set.end());
  return chart_row(
      {line_chart("Steps to target vs global batch (dashed: S_min (1 + B_crit/B) fitted)", "steps",
                  xs, series, 0, XAxis{"global batch"}, 0, true)});
}

/// busbw against message size, one chart per operation.
std::string commbench_charts(const std::vector<BusbwSeries>& all) {
  std::vector<std::string> ops;
  for (const BusbwSeries& s : all) {
    if (std::find(ops.begin(), ops.end(), s.op) == ops.end()) ops.push_back(s.op);
  }
  std::ostringstream o;
  o << "<div class=\"charts\">\n";
  for (const std::string& op : ops) {
    std::set<double> xs_set;
    std::vector<Series> series;
    for (const BusbwSeries& s : all) {
      if (s.op != op) continue;
      for (const auto& [x, unused] : s.points) xs_set.insert(x);
      series.push_back({s.name, s.points, static_cast<int>(series.size()), false});
    }
    const std::vector<double> xs(xs_set.begin(), xs_set.end());
    o << line_chart(op + ": bus bandwidth vs message size", "busbw (GB/s)", xs, series, 0,
                    {"message size (bytes)", bytes_label});
  }
  o << "</div>\n";
  return o.str();
}

/// A legend name for a time-to-accuracy row: "tinycnn 2 workers lr=0.2".
std::string tta_name(const TtaRow& r) {
  std::string s = fmt::format("{} {} worker{}", r.labels.front().second, r.workers, r.workers == 1 ? "" : "s");
  for (std::size_t i = 1; i < r.labels.size(); ++i) {  // the model comes first
    const auto& [k, v] = r.labels[i];
    s += " " + (k[0] == '_' ? v : k + "=" + v);
  }
  return s;
}

/// Top-1 accuracy against epochs and against run time: one line per row
/// (worker count and configuration), its representative_run; the target
/// dashed when the runs share one. "" when no run has evaluations.
std::string tta_charts(const std::vector<TtaRow>& rows) {
  std::vector<Series> by_epoch, by_time;
  std::set<double> targets;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const TtaRun& run = representative_run(rows[i]);
    Series e{tta_name(rows[i]), {}, static_cast<int>(i), false};
    Series t = e;
    for (const EvalPoint& p : convergence_evals(*run.repeat)) {
      e.points.emplace_back(p.epoch, 100 * p.accuracy);
      t.points.emplace_back(p.run_seconds, 100 * p.accuracy);
    }
    if (e.points.empty()) continue;
    const auto target = run.repeat->metrics.find(std::string(record::metric::kConvergencePrefix) + "target");
    targets.insert(target == run.repeat->metrics.end() ? 0.0 : target->second);
    by_epoch.push_back(std::move(e));
    by_time.push_back(std::move(t));
  }
  if (by_epoch.empty()) return "";
  // Accuracy curves sit near the top: start the y axis at a multiple of 10
  // at least 5 points below the lowest value (the target included).
  double lowest = 100;
  for (const Series& s : by_epoch) {
    for (const auto& [x, y] : s.points) lowest = std::min(lowest, y);
  }
  for (double t : targets) lowest = t > 0 ? std::min(lowest, 100 * t) : lowest;
  const double y_floor = std::max(0.0, std::floor((lowest - 5) / 10) * 10);
  std::string dashed;
  if (targets.size() == 1 && *targets.begin() > 0) {
    const double y = 100 * *targets.begin();
    dashed = fmt::format(" (dashed: target {:g}%)", y);
    for (std::vector<Series>* chart : {&by_epoch, &by_time}) {
      double xmax = 0;
      for (const Series& s : *chart) xmax = std::max(xmax, s.points.back().first);
      chart->push_back({"target", {{0.0, y}, {xmax, y}}, 0, true, "#888"});
    }
  }
  std::ostringstream o;
  o << "<div class=\"charts\">\n";
  o << line_chart("Accuracy vs epoch" + dashed, "accuracy (%)", {}, by_epoch, 100, {"epoch", tick_label, true},
                  y_floor);
  o << line_chart("Accuracy vs run time" + dashed, "accuracy (%)", {}, by_time, 100,
                  {"run time (s)", tick_label, true}, y_floor);
  o << "</div>\n";
  return o.str();
}

std::string breakdown_chart(const Report& rep) {
  const Table& t = rep.tables.front();
  const std::size_t first_phase = t.headers.size() - 6;  // data .. optimizer, total
  const int bar_h = 22, gap = 8, left = 260, right = 30, top = 50, w = 900;
  const int h = top + static_cast<int>(t.rows.size()) * (bar_h + gap) + 40;
  double max_total = 0;
  for (const auto& row : t.rows) max_total = std::max(max_total, row.back().value.value_or(0));
  const double step = nice_step(max_total / 6);
  const double xmax = std::max(step, std::ceil(max_total / step - 1e-9) * step);
  const double pw = w - left - right;
  std::ostringstream o;
  o << fmt::format(R"svg(<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" viewBox="0 0 {} {}" role="img" aria-label="step-time breakdown">)svg",
                   w, h, w, h)
    << "\n";
  o << R"svg(<text x="10" y="20" class="ct">Step-time breakdown (median ms per step)</text>)svg" << "\n";
  for (std::size_t i = 0; i < 5; ++i) {
    const int lx = left + static_cast<int>(i) * 110;
    o << fmt::format(R"svg(<rect x="{}" y="30" width="12" height="12" fill="{}"/><text x="{}" y="41" class="lg">{}</text>)svg",
                     lx, kColors[i], lx + 16, esc(t.headers[first_phase + i]))
      << "\n";
  }
  for (double x = 0; x <= xmax + step / 2; x += step) {
    const double gx = left + x / xmax * pw;
    o << fmt::format(R"svg(<line x1="{:.1f}" x2="{:.1f}" y1="{}" y2="{}" class="grid"/><text x="{:.1f}" y="{}" class="xt">{}</text>)svg",
                     gx, gx, top, h - 30, gx, h - 14, tick_label(x))
      << "\n";
  }
  int y = top + 4;
  for (const auto& row : t.rows) {
    std::string label;
    for (std::size_t c = 0; c < first_phase; ++c) {
      const std::string& header = t.headers[c];
      const std::string& v = row[c].text;
      label += c ? " " : "";
      if (header == "workers") {
        label += "w" + v;
      } else if (header == "batch/worker") {
        label += "b" + v;
      } else {
        label += header == "model" || header == "scaling" || header[0] == '_' ? v : header + "=" + v;
      }
    }
    o << fmt::format(R"svg(<text x="{}" y="{}" class="yt">{}</text>)svg", left - 8, y + 15, esc(label)) << "\n";
    double x = 0;
    for (std::size_t i = 0; i < 5; ++i) {
      const double ms = row[first_phase + i].value.value_or(0);
      o << fmt::format(R"svg(<rect x="{:.1f}" y="{}" width="{:.1f}" height="{}" fill="{}"><title>{}: {:.2f} ms</title></rect>)svg",
                       left + x / xmax * pw, y, ms / xmax * pw, bar_h, kColors[i], esc(t.headers[first_phase + i]), ms)
        << "\n";
      x += ms;
    }
    y += bar_h + gap;
  }
  o << fmt::format(R"svg(<text x="{:.1f}" y="{}" class="xl">ms per step</text>)svg", left + pw / 2, h - 1) << "</svg>\n";
  return o.str();
}

std::string html_table(const Table& t) {
  std::ostringstream o;
  o << "<h3>" << esc(t.title) << "</h3>\n<table>\n<tr>";
  for (std::size_t i = 0; i < t.headers.size(); ++i) {
    o << "<th" << (t.numeric[i] ? " class=\"n\"" : "") << ">" << esc(t.headers[i]) << "</th>";
  }
  o << "</tr>\n";
  for (const auto& row : t.rows) {
    o << "<tr>";
    for (std::size_t i = 0; i < row.size(); ++i) {
      o << "<td" << (t.numeric[i] ? " class=\"n\"" : "") << ">" << esc(row[i].text) << "</td>";
    }
    o << "</tr>\n";
  }
  o << "</table>\n";
  return o.str();
}

std::string report_section(const Report& rep) {
  std::ostringstream o;
  for (const Table& t : rep.tables) o << html_table(t);
  for (const std::string& n : rep.notes) o << "<p class=\"note\">" << esc(n) << "</p>\n";
  return o.str();
}

std::string runs_section(const std::vector<sweep::RunRecord>& runs) {
  std::ostringstream o;
  o << "<h2 id=\"runs\">Runs and their parameters</h2>\n<table class=\"runs\">\n"
    << "<tr><th class=\"n\">id</th><th>sweep</th><th>status</th><th class=\"n\">repeats</th><th>started</th>"
       "<th>host</th><th>parameters</th></tr>\n";
  for (const sweep::RunRecord& r : runs) {
    int ok = 0;
    for (const auto& rep : r.repeats) ok += rep.status == sweep::kStatusCompleted ? 1 : 0;
    o << "<tr><td class=\"n\">" << r.id << "</td><td>" << esc(r.sweep) << "</td><td class=\"s-" << esc(r.status)
      << "\">" << esc(r.status) << (r.reason.empty() ? "" : ": " + esc(r.reason)) << "</td><td class=\"n\">" << ok
      << "/" << r.repeats.size() << "</td><td>" << esc(r.started_at) << "</td><td>" << esc(r.host)
      << "</td><td><code>" << esc(dump_json(sweep::to_json(r.params))) << "</code></td></tr>\n";
  }
  o << "</table>\n";
  return o.str();
}

constexpr const char* kStyle = R"css(
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px; color: #222; max-width: 1400px; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; } h2 { margin-top: 1.8em; border-bottom: 1px solid #ccc; }
h3 { font-size: 1em; margin: 1.2em 0 0.4em; }
table { border-collapse: collapse; font-size: 0.9em; margin-bottom: 0.6em; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f3f3f3; } .n { text-align: right; font-variant-numeric: tabular-nums; }
.note, .meta { color: #555; font-size: 0.9em; } code { font-size: 0.85em; word-break: break-all; }
.charts { display: flex; flex-wrap: wrap; gap: 16px; }
svg.chart { border: 1px solid #e5e5e5; background: #fff; }
svg .grid { stroke: #e8e8e8; } svg .axis { stroke: #444; }
svg .ct { font-size: 14px; font-weight: bold; } svg .yt { font-size: 11px; text-anchor: end; }
svg .xt { font-size: 11px; text-anchor: middle; } svg .xl { font-size: 12px; text-anchor: middle; }
svg .lg { font-size: 11px; }
td.s-failed, td.s-timeout, td.s-oom, td.s-interrupted { color: #b00; } td.s-skipped { color: #777; }
)css";

}  // namespace

std::string render_html(const std::vector<sweep::RunRecord>& all, const HtmlOptions& opt) {
  DLSCALE_CHECK(!all.empty(), "no runs in the selection");
  std::vector<sweep::RunRecord> runs;  // training and external runs: the scaling sections
  for (const auto& r : all) {
    if (!is_commbench_run(r)) runs.push_back(r);
  }
  std::set<std::string> sweeps;
  for (const auto& r : all) sweeps.insert(r.sweep);
  std::ostringstream o;
  o << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>" << esc(opt.title)
    << "</title>\n<style>" << kStyle << "</style>\n</head>\n<body>\n";
  o << "<h1>" << esc(opt.title) << "</h1>\n<p class=\"meta\">" << all.size() << " run(s) from sweep(s) "
    << esc(fmt::format("{}", fmt::join(sweeps, ", "))) << (opt.source.empty() ? "" : " in " + esc(opt.source))
    << "</p>\n";
  bool any = false;
  for (const std::string scaling : {"weak", "strong"}) {
    const std::vector<ScalingRow> rows = scaling_rows(runs, scaling);
    if (rows.empty()) continue;
    any = true;
    const Report rep = build_report(runs, {scaling, "", ""});
    o << "<h2 id=\"" << scaling << "\">" << esc(rep.title) << "</h2>\n" << scaling_charts(rows) << report_section(rep);
  }
  if (const std::vector<BusbwSeries> bw = busbw_series(all); !bw.empty()) {
    const Report rep = build_report(all, {"commbench", "", ""});
    o << "<h2 id=\"commbench\">" << esc(rep.title) << "</h2>\n" << commbench_charts(bw) << report_section(rep);
    any = true;
  }
  if (!runs.empty()) {
    try {
      const Report rep = build_report(runs, {"breakdown", "", ""});
      o << "<h2 id=\"breakdown\">Where the time goes</h2>\n" << breakdown_chart(rep) << report_section(rep);
      any = true;
    } catch (const Error&) {
      // No dlscale run with a breakdown in the selection: no section.
    }
  }
  if (const std::vector<MemoryRow> rows = memory_rows(runs); !rows.empty()) {
    const Report rep = build_report(runs, {"memory", "", ""});
    o << "<h2 id=\"memory\">Memory per worker</h2>\n" << memory_charts(rows) << report_section(rep);
  }
  if (const std::vector<NoiseRow> rows = noise_rows(runs); !rows.empty()) {
    const Report rep = build_report(runs, {"noise", "", ""});
    o << "<h2 id=\"noise\">Gradient noise scale</h2>\n" << noise_chart(rows) << report_section(rep);
  }
  if (const std::vector<BatchStudy> studies = batch_studies(runs);
      std::any_of(studies.begin(), studies.end(), [](const BatchStudy& s) {
        return std::count_if(s.points.begin(), s.points.end(),
                             [](const BatchPoint& p) { return p.steps; }) >= 2;
      })) {
    const Report rep = build_report(runs, {"batch", "", ""});
    o << "<h2 id=\"batch\">Steps to target against the global batch</h2>\n"
      << batch_chart(studies) << report_section(rep);
  }
  if (!runs.empty() && (!opt.compare_by.empty() || !detect_compare_by(runs).empty())) {
    const Report rep = build_report(runs, {"compare", opt.compare_by, opt.baseline});
    o << "<h2 id=\"compare\">Comparison</h2>\n" << report_section(rep);
  }
  if (!runs.empty()) {
    try {
      const Report rep = build_report(runs, {"io", "", ""});
      o << "<h2 id=\"io\">" << esc(rep.title) << "</h2>\n" << report_section(rep);
    } catch (const Error&) {
      // No runs that differ in data with a synthetic baseline: no section.
    }
  }
  if (const std::vector<TtaRow> rows = tta_rows(runs); !rows.empty()) {
    const Report rep = build_report(runs, {"tta", "", ""});
    o << "<h2 id=\"tta\">" << esc(rep.title) << "</h2>\n" << tta_charts(rows) << report_section(rep);
    any = true;
  }
  if (!any) o << "<p>No completed run has a throughput yet; see the runs below.</p>\n";
  o << runs_section(all);
  o << "<p class=\"meta\">Written by dlscale report. Metrics are defined in docs/metrics.md.</p>\n</body>\n</html>\n";
  return o.str();
}

std::string html_escape(const std::string& s) { return esc(s); }

std::string render_chart_page(const std::string& title, const std::vector<std::string>& notes,
                              const std::vector<ChartSpec>& charts, const std::string& body_html) {
  std::ostringstream o;
  o << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>" << esc(title)
    << "</title>\n<style>" << kStyle << "</style>\n</head>\n<body>\n<h1>" << esc(title) << "</h1>\n";
  for (const std::string& n : notes) o << "<p class=\"meta\">" << esc(n) << "</p>\n";
  std::vector<std::string> svgs;
  for (const ChartSpec& c : charts) {
    std::vector<Series> series;
    for (size_t i = 0; i < c.lines.size(); ++i) {
      Series s{c.lines[i].name, c.lines[i].points, static_cast<int>(i), c.lines[i].dashed};
      if (s.dashed) s.stroke = "#888";
      series.push_back(std::move(s));
    }
    svgs.push_back(line_chart(c.title, c.y_label, c.xs, series, c.y_min_top));
  }
  o << chart_row(svgs) << body_html << "</body>\n</html>\n";
  return o.str();
}

}  // namespace dlscale::report
