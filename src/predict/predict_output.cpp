#include "predict/predict_output.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/error.h"
#include "core/stats.h"
#include "core/text_table.h"
#include "report/html.h"

namespace dlscale::predict {
namespace {

std::string link_text(const Link& l) {
  return fmt::format("{:.3g} Gbit/s, {:.3g} us", l.bytes_per_s * 8 / 1e9, l.alpha_s * 1e6);
}

/// "; casts 1.6 GB/s", or per 16-bit type where they differ; "" when free.
std::string cast_text(const Network& n) {
  const double f16 = n.cast_rate("fp16"), b16 = n.cast_rate("bf16");
  if (f16 <= 0 && b16 <= 0) return "";
  if (f16 == b16) return fmt::format("; casts {:.3g} GB/s", f16 / 1e9);
  return fmt::format("; casts fp16 {:.3g}, bf16 {:.3g} GB/s", f16 / 1e9, b16 / 1e9);
}

}  // namespace

std::vector<std::string> prediction_header(const Prediction& p) {
  const Workload& w = p.workload;
  const Network& n = p.network;
  std::vector<std::string> lines;
  lines.push_back(fmt::format("model {}: {:.1f} MB of fp32 gradients in {} tensors; one worker at batch {}: forward "
                              "{:.2f} ms, backward {:.2f} ms, optimizer {:.2f} ms, data {:.2f} ms",
                              w.model, static_cast<double>(w.param_bytes()) / 1e6, w.grads.size(), w.batch,
                              w.forward_s * 1e3, w.backward_s * 1e3, w.optimizer_s * 1e3, w.data_s * 1e3));
  lines.push_back("compute from " + w.source);
  if (p.options.busy) {
    lines.push_back(fmt::format("where {} or more workers share cores: compute from {}",
                                busy_from_workers(*p.options.busy), p.options.busy->source));
  }
  lines.push_back(fmt::format(
      "network: {} worker(s) per node; inside a node {}; between nodes {}{}{}", n.workers_per_node,
      link_text(n.intra), link_text(n.inter),
      n.fabric.nodes_per_group > 0
          ? fmt::format("; a fabric of {} node(s) a group, each group's uplink {:.3g} Gbit/s",
                        n.fabric.nodes_per_group, n.fabric.bytes_per_s * 8 / 1e9)
          : "",
      cast_text(n)));
  const PredictOptions& o = p.options;
  lines.push_back(fmt::format("{} scaling, batch {}{}; buckets {:g} MiB (first {:g} MiB); efficiency against one "
                              "worker without exchange ({:.2f} ms a step)",
                              o.scaling, o.batch > 0 ? o.batch : w.batch,
                              o.scaling == "weak" ? " per worker" : " in all", o.bucket_mb, o.first_bucket_mb,
                              p.t1_s * 1e3));
  return lines;
}

std::vector<long long> chart_points(const std::vector<long long>& ns) {
  if (ns.size() <= 24) return ns;
  std::vector<long long> out;
  const double lo = std::log(static_cast<double>(ns.front())), hi = std::log(static_cast<double>(ns.back()));
  size_t j = 0;
  for (int i = 0; i < 24; ++i) {
    const double target = std::exp(lo + (hi - lo) * i / 23.0);
    while (j + 1 < ns.size() && static_cast<double>(ns[j]) < target) ++j;
    if (out.empty() || out.back() != ns[j]) out.push_back(ns[j]);
  }
  return out;
}

namespace {

std::string unit_per_s(const Prediction& p) { return p.workload.unit + "/s"; }

}  // namespace

void print_prediction(const Prediction& p, std::ostream& out) {
  for (const std::string& line : prediction_header(p)) out << line << "\n";
  for (const StrategyPrediction& sp : p.strategies) {
    out << "\nstrategy " << sp.spec.label << "\n";
    TextTable t({"N", "step ms", unit_per_s(p), "speedup", "eff %", "exposed ms", "MB/rank", "bottleneck"},
                {Align::kRight, Align::kRight, Align::kRight, Align::kRight, Align::kRight, Align::kRight,
                 Align::kRight, Align::kLeft});
    for (const StepPrediction& s : sp.points) {
      t.add_row({std::to_string(s.workers), fmt::format("{:.2f}", s.step_s * 1e3), fmt::format("{:.1f}", s.throughput),
                 fmt::format("{:.2f}", s.speedup), fmt::format("{:.1f}", s.efficiency_pct),
                 fmt::format("{:.2f}", s.exposed_comm_s * 1e3), fmt::format("{:.1f}", s.bytes_per_rank / 1e6),
                 s.bottleneck});
    }
    t.print(out);
  }
}

nlohmann::json prediction_json(const Prediction& p, const std::vector<std::string>& argv) {
  const Workload& w = p.workload;
  const Network& n = p.network;
  nlohmann::json strategies = nlohmann::json::array();
  for (const StrategyPrediction& sp : p.strategies) {
    nlohmann::json points = nlohmann::json::array();
    for (const StepPrediction& s : sp.points) {
      points.push_back({{"workers", s.workers},
                        {"batch_per_worker", s.batch_per_worker},
                        {"step_ms", s.step_s * 1e3},
                        {"compute_ms", s.compute_s * 1e3},
                        {"exposed_comm_ms", s.exposed_comm_s * 1e3},
                        {"samples_per_sec", s.throughput},
                        {"speedup", s.speedup},
                        {"efficiency_pct", s.efficiency_pct},
                        {"bytes_per_rank", s.bytes_per_rank},
                        {"bottleneck", s.bottleneck}});
    }
    strategies.push_back({{"strategy", sp.spec.label}, {"points", std::move(points)}});
  }
  auto link = [](const Link& l) { return nlohmann::json{{"alpha_us", l.alpha_s * 1e6}, {"gbit_s", l.bytes_per_s * 8 / 1e9}}; };
  nlohmann::json busy;  // null without --calibrate-busy
  if (const Workload* b = p.options.busy.get()) {
    busy = {{"side_by_side", b->side_by_side},
            {"batch", b->batch},
            {"forward_ms", b->forward_s * 1e3},
            {"backward_ms", b->backward_s * 1e3},
            {"optimizer_ms", b->optimizer_s * 1e3},
            {"data_ms", b->data_s * 1e3},
            {"source", b->source}};
  }
  return {{"schema", "dlscale.predict/1"},
          {"kind", "predict"},
          {"argv", argv},
          {"workload",
           {{"model", w.model},
            {"unit", w.unit},
            {"batch", w.batch},
            {"forward_ms", w.forward_s * 1e3},
            {"backward_ms", w.backward_s * 1e3},
            {"optimizer_ms", w.optimizer_s * 1e3},
            {"data_ms", w.data_s * 1e3},
            {"gradient_bytes", w.param_bytes()},
            {"tensors", w.grads.size()},
            {"source", w.source},
            {"busy", std::move(busy)}}},
          {"network",
           {{"workers_per_node", n.workers_per_node},
            {"intra", link(n.intra)},
            {"inter", link(n.inter)},
            {"fabric", n.fabric.nodes_per_group > 0
                           ? nlohmann::json{{"nodes_per_group", n.fabric.nodes_per_group},
                                            {"uplink_gbit_s", n.fabric.bytes_per_s * 8 / 1e9}}
                           : nlohmann::json()},
            {"cast_gbyte_s", n.cast_bytes_per_s / 1e9},
            {"cast16_gbyte_s",
             {{"fp16", n.cast_rate("fp16") / 1e9}, {"bf16", n.cast_rate("bf16") / 1e9}}}}},
          {"options",
           {{"scaling", p.options.scaling},
            {"batch", p.options.batch > 0 ? p.options.batch : w.batch},
            {"bucket_mb", p.options.bucket_mb},
            {"first_bucket_mb", p.options.first_bucket_mb},
            {"input_samples_per_sec", p.options.input_samples_per_s},
            {"cores_per_node", p.options.cores_per_node}}},
          {"t1_ms", p.t1_s * 1e3},
          {"strategies", std::move(strategies)}};
}

std::string prediction_html(const Prediction& p) {
  const std::vector<long long> ns = chart_points(p.options.workers);
  report::ChartSpec eff{"Predicted " + p.options.scaling + " scaling efficiency", "efficiency %", {}, {}, 100};
  report::ChartSpec thr{"Predicted throughput", unit_per_s(p), {}, {}, 0};
  for (long long n : ns) eff.xs.push_back(static_cast<double>(n));
  thr.xs = eff.xs;
  for (const StrategyPrediction& sp : p.strategies) {
    report::ChartLine e{sp.spec.label, {}, false}, t{sp.spec.label, {}, false};
    for (const StepPrediction& s : sp.points) {
      if (!std::binary_search(ns.begin(), ns.end(), s.workers)) continue;
      e.points.emplace_back(static_cast<double>(s.workers), s.efficiency_pct);
      t.points.emplace_back(static_cast<double>(s.workers), s.throughput);
    }
    eff.lines.push_back(std::move(e));
    thr.lines.push_back(std::move(t));
  }
  // The tables hold the charted N only: 100,000 rows would bury the page.
  Prediction shown = p;
  for (StrategyPrediction& sp : shown.strategies) {
    const auto hidden = [&](const StepPrediction& s) { return !std::binary_search(ns.begin(), ns.end(), s.workers); };
    sp.points.erase(std::remove_if(sp.points.begin(), sp.points.end(), hidden), sp.points.end());
  }
  std::ostringstream tables;
  print_prediction(shown, tables);
  return report::render_chart_page(
      "dlscale predict: " + p.workload.model, prediction_header(p), {eff, thr},
      "<h2>Tables</h2>\n<pre>" + report::html_escape(tables.str()) + "</pre>\n");
}

std::vector<ValidationRow> validate_system(const SystemSpec& system,
                                           const std::function<Workload(const std::string& model)>& workload_for) {
  DLSCALE_CHECK(!system.strategy.empty(), "system '{}' names no 'strategy' to check its published figures with",
                system.name);
  const StrategySpec spec = parse_strategy(system.strategy);
  std::vector<ValidationRow> rows;
  for (const PublishedScaling& pub : system.published) {
    const Workload w = workload_for(pub.model);
    PredictOptions o;
    o.workers = pub.workers;
    o.workers.push_back(pub.baseline_workers);
    std::sort(o.workers.begin(), o.workers.end());
    o.workers.erase(std::unique(o.workers.begin(), o.workers.end()), o.workers.end());
    system.apply(o);
    const Prediction pred = predict(w, system.network, {spec}, o);
    auto predicted = [&](long long n) -> const StepPrediction& {
      for (const StepPrediction& s : pred.strategies[0].points) {
        if (s.workers == n) return s;
      }
      throw InternalError("a predicted N is missing");
    };
    const StepPrediction& base = predicted(pub.baseline_workers);
    const double base_per_worker = base.throughput / static_cast<double>(pub.baseline_workers);
    double pub_base = 0;
    for (size_t i = 0; i < pub.workers.size() && !pub.samples_per_s.empty(); ++i) {
      if (pub.workers[i] == pub.baseline_workers) pub_base = pub.samples_per_s[i] / static_cast<double>(pub.baseline_workers);
    }
    if (!pub.samples_per_s.empty() && pub_base == 0) pub_base = system.rate(pub.model);
    for (size_t i = 0; i < pub.workers.size(); ++i) {
      const StepPrediction& s = predicted(pub.workers[i]);
      ValidationRow r;
      r.model = pub.model;
      r.workers = pub.workers[i];
      r.predicted_rate = s.throughput;
      r.predicted_eff_pct = 100.0 * s.throughput / (base_per_worker * static_cast<double>(r.workers));
      if (!pub.samples_per_s.empty()) {
        r.published_rate = pub.samples_per_s[i];
        r.published_eff_pct = 100.0 * r.published_rate / (pub_base * static_cast<double>(r.workers));
      } else {
        r.published_eff_pct = pub.efficiency_pct[i];
      }
      r.bottleneck = s.bottleneck;
      r.source = pub.source;
      rows.push_back(std::move(r));
    }
  }
  return rows;
}

void print_validation(const SystemSpec& system, const std::vector<ValidationRow>& rows, std::ostream& out) {
  out << "system " << system.name << (system.description.empty() ? "" : ": " + system.description) << "\n"
      << "strategy " << system.strategy << "; calibrated on one device's published samples/s at batch "
      << system.batch << " only\n";
  TextTable t({"model", "N", "published/s", "predicted/s", "rate err %", "published eff %", "predicted eff %",
               "diff pts", "bottleneck"},
              {Align::kLeft, Align::kRight, Align::kRight, Align::kRight, Align::kRight, Align::kRight, Align::kRight,
               Align::kRight, Align::kLeft});
  std::vector<double> diffs;
  for (const ValidationRow& r : rows) {
    const double diff = r.predicted_eff_pct - r.published_eff_pct;
    diffs.push_back(std::fabs(diff));
    const bool rate = r.published_rate > 0;
    t.add_row({r.model, std::to_string(r.workers), rate ? fmt::format("{:.1f}", r.published_rate) : "-",
               fmt::format("{:.1f}", r.predicted_rate),
               rate ? fmt::format("{:+.1f}", 100.0 * (r.predicted_rate - r.published_rate) / r.published_rate) : "-",
               fmt::format("{:.1f}", r.published_eff_pct), fmt::format("{:.1f}", r.predicted_eff_pct),
               fmt::format("{:+.1f}", diff), r.bottleneck});
  }
  t.print(out);
  if (!diffs.empty()) {
    out << fmt::format("efficiency: median |diff| {:.1f} points, largest {:.1f} points over {} point(s)\n",
                       median(diffs), *std::max_element(diffs.begin(), diffs.end()), diffs.size());
  }
}

}  // namespace dlscale::predict
