#include "predict/tta.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/error.h"
#include "core/record_keys.h"
#include "core/text_table.h"
#include "predict/predict_output.h"
#include "report/html.h"

namespace dlscale::predict {

namespace {

/// "12.3 s", "4.56 min", "7.89 h".
std::string duration(double s) {
  if (s < 120) return fmt::format("{:.3g} s", s);
  if (s < 7200) return fmt::format("{:.3g} min", s / 60);
  return fmt::format("{:.3g} h", s / 3600);
}

/// results.convergence of a record, checked to have reached its target.
const nlohmann::json& reached_convergence(const nlohmann::json& record, const std::string& what) {
  const nlohmann::json& conv = convergence_of(record);
  DLSCALE_CHECK(conv.is_object() && conv.value("target", 0.0) > 0,
                "{}: the run had no target (train --target-accuracy), so it says nothing about "
                "time to accuracy",
                what);
  const std::string status = conv.value(record::kConvergenceStatus, "");
  DLSCALE_CHECK(status == record::kStatusSuccess,
                "{}: the run did not reach its target (status '{}'); --tta needs one that did",
                what, status);
  return conv;
}

}  // namespace

const nlohmann::json& convergence_of(const nlohmann::json& record) {
  static const nlohmann::json kNone;
  const auto results = record.find(record::kResults);
  if (results == record.end() || !results->is_object()) return kNone;
  const auto conv = results->find(record::kConvergence);
  return conv != results->end() && conv->is_object() ? *conv : kNone;
}

const std::vector<std::string>& tta_noise_kinds() {
  static const std::vector<std::string> kinds = {"auto", "simple", "adam", "final", "final-adam"};
  return kinds;
}

namespace {

/// `section`.b_simple where it is finite and positive, else 0.
double usable_b_simple(const nlohmann::json& section) {
  const nlohmann::json b = section.value("b_simple", nlohmann::json());
  return b.is_number() && std::isfinite(b.get<double>()) && b.get<double>() > 0 ? b.get<double>()
                                                                                : 0;
}

/// `noise`.preconditioned.b_simple where it is finite and positive, else 0.
double adam_noise_scale(const nlohmann::json& noise) {
  const auto p = noise.find("preconditioned");
  if (p == noise.end() || !p->is_object()) return 0;
  return usable_b_simple(*p);
}

/// Why B_simple over training cannot be used: it is missing, undefined or
/// not positive.
std::string simple_refusal(const nlohmann::json& noise, const std::string& what) {
  const nlohmann::json b = noise.value("b_simple", nlohmann::json());
  return fmt::format(
      "{}: the gradient noise scale is {}; a longer run gives a defined one", what,
      b.is_number()
          ? fmt::format("{:g}, not positive (its tr(Sigma) estimate was negative)", b.get<double>())
          : "undefined (its |G|^2 estimate was not positive)");
}

/// The record's noise scales into `r`, and the one `kind` picks (named in
/// r.noise); refuses one line where that one is missing or unusable.
double pick_noise_scale(const nlohmann::json& noise, const std::string& kind,
                        const std::string& what, TtaRun& r) {
  r.b_simple = usable_b_simple(noise);
  r.b_adam = adam_noise_scale(noise);
  r.adam_measured = noise.contains("preconditioned") && noise["preconditioned"].is_object();
  const auto final = noise.find("final");
  r.final_measured = final != noise.end() && final->is_object();
  if (r.final_measured) {
    r.final_b_simple = usable_b_simple(*final);
    r.final_b_adam = adam_noise_scale(*final);
  }
  const bool final_kind = kind == "final" || kind == "final-adam";
  DLSCALE_CHECK(!final_kind || r.final_measured,
                "{}: --tta-noise {} needs the noise scale at the final weights "
                "(results.noise.final: train --noise-final N), which this run did not measure",
                what, kind);
  DLSCALE_CHECK(kind != "final" || r.final_b_simple > 0,
                "{}: the noise scale at the final weights is undefined or not positive; more "
                "--noise-final batches give a defined one",
                what);
  DLSCALE_CHECK(kind != "final-adam" || r.final_b_adam > 0,
                "{}: --tta-noise final-adam needs Adam's preconditioned noise scale at the final "
                "weights, which this run did not measure or is undefined",
                what);
  DLSCALE_CHECK(kind != "adam" || r.b_adam > 0,
                "{}: --tta-noise adam needs Adam's preconditioned noise scale "
                "(results.noise.preconditioned), which this run did not measure",
                what);
  const bool use_final =
      final_kind || (kind == "auto" && (r.final_b_simple > 0 || r.final_b_adam > 0));
  if (use_final) {
    const bool adam = kind != "final" && r.final_b_adam > 0;
    r.noise = adam ? "final B_adam" : "final B_simple";
    return adam ? r.final_b_adam : r.final_b_simple;
  }
  const bool adam = kind != "simple" && r.b_adam > 0;
  DLSCALE_CHECK(adam || r.b_simple > 0, "{}", simple_refusal(noise, what));
  r.noise = adam ? "B_adam" : "B_simple";
  return adam ? r.b_adam : r.b_simple;
}

}  // namespace

TtaRun tta_run_from_record(const nlohmann::json& record, const std::string& what,
                           const std::string& noise_kind) {
  const auto& kinds = tta_noise_kinds();
  DLSCALE_CHECK(std::find(kinds.begin(), kinds.end(), noise_kind) != kinds.end(),
                "--tta-noise '{}' is not one of auto, simple, adam, final, final-adam", noise_kind);
  DLSCALE_CHECK(record.is_object() && record.value(record::kKind, "") == record::kKindTrain,
                "{}: not a 'dlscale train' record (kind must be 'train')", what);
  const nlohmann::json& conv = reached_convergence(record, what);
  TtaRun r;
  r.source = what;
  const nlohmann::json model = record.value(record::kModel, nlohmann::json());
  r.model = model.is_object() ? model.value(record::kModelName, "") : "";
  r.metric = conv.value(record::kConvergenceMetric, "accuracy");
  r.target = number_at(conv, {"target"}, what + " results.convergence");
  r.epochs = number_at(conv, {"epochs_to_target"}, what + " results.convergence");
  const double steps = number_at(conv, {"steps_done"}, what + " results.convergence");
  const nlohmann::json inputs = record.value(record::kInputs, nlohmann::json());
  const double accumulate =
      inputs.is_object() ? inputs.value(record::input::kAccumulate, 1.0) : 1.0;
  r.global_batch = number_at(record, {record::kInputs, record::input::kBatch}, what) *
                   number_at(record, {record::kInputs, record::input::kWorldSize}, what) *
                   accumulate;
  DLSCALE_CHECK(r.epochs > 0 && steps > 0 && r.global_batch > 0,
                "{}: epochs to target, steps and the global batch must be > 0", what);
  r.samples_per_epoch = steps * r.global_batch / r.epochs;
  const nlohmann::json& results = record.at(record::kResults);
  const nlohmann::json noise = results.value(record::kNoise, nlohmann::json());
  DLSCALE_CHECK(noise.is_object(),
                "{}: the record has no gradient noise scale (train --noise-scale)", what);
  const double b_noise = pick_noise_scale(noise, noise_kind, what, r);
  r.model_fit = model_from_run(r.epochs, r.global_batch, b_noise, r.samples_per_epoch);
  return r;
}

TtaPrediction predict_tta(const Workload& w, const Network& n,
                          const std::vector<StrategySpec>& strategies,
                          const PredictOptions& options, const TtaRun& run,
                          double max_global_batch) {
  DLSCALE_CHECK(options.scaling == "weak",
                "--tta predicts weak scaling (the global batch grows with N); "
                "cap it with --max-global-batch instead of --global-batch");
  DLSCALE_CHECK(max_global_batch >= 0, "--max-global-batch must be >= 1");
  TtaPrediction p;
  p.run = run;
  p.max_global_batch = max_global_batch;
  p.batch_per_worker = static_cast<double>(options.batch > 0 ? options.batch : w.batch);
  const auto per_worker = [&](long long workers) {
    const double b = p.batch_per_worker;
    return max_global_batch > 0 ? std::min(b, max_global_batch / static_cast<double>(workers)) : b;
  };
  for (long long workers : options.workers) {
    DLSCALE_CHECK(per_worker(workers) >= 1, "N = {} workers exceed --max-global-batch {:g}",
                  workers, max_global_batch);
  }
  // The scaling model gives each N's step (as predict does, at its batch).
  p.t1_s = one_worker_step_s(w, per_worker(1));
  const double t1_time = run.model_fit.steps(per_worker(1)) * p.t1_s;
  for (const StrategySpec& spec : strategies) {
    TtaStrategy ts{spec.label, {}, 0, 0};
    for (const StepPrediction& step : predict_steps(w, n, spec, options, per_worker)) {
      TtaPoint t;
      t.workers = step.workers;
      t.global_batch = step.batch_per_worker * static_cast<double>(step.workers);
      t.steps = run.model_fit.steps(t.global_batch);
      t.epochs = run.model_fit.epochs(t.global_batch);
      t.step_s = step.step_s;
      t.time_s = t.steps * t.step_s;
      t.speedup = t1_time / t.time_s;
      t.device_hours = static_cast<double>(t.workers) * t.time_s / 3600;
      ts.points.push_back(t);
    }
    for (size_t i = 1; i < ts.points.size(); ++i) {
      if (ts.points[i].time_s < ts.points[ts.fastest].time_s) ts.fastest = i;
      if (ts.points[i].device_hours < ts.points[ts.cheapest].device_hours) ts.cheapest = i;
    }
    p.strategies.push_back(std::move(ts));
  }
  return p;
}

namespace {

/// A noise scale for the first line: its value, or why there is none.
std::string noise_value(double b) {
  return b > 0 ? fmt::format("{:.4g}", b) : "undefined or not positive";
}

std::vector<std::string> tta_lines(const TtaPrediction& p) {
  const TtaRun& r = p.run;
  const BatchModel& m = r.model_fit;
  std::vector<std::string> lines;
  const std::string final =
      r.final_measured
          ? fmt::format("; at the final weights B_simple {}{}", noise_value(r.final_b_simple),
                        r.adam_measured ? ", B_adam " + noise_value(r.final_b_adam) : "")
          : "";
  lines.push_back(fmt::format(
      "time to accuracy from {}: {} reached {} >= {:g} in {:.3g} epochs at global batch "
      "{:g}; gradient noise scale B_simple {}{}{}",
      r.source, r.model.empty() ? "the run" : r.model, r.metric, r.target, r.epochs, r.global_batch,
      noise_value(r.b_simple),
      r.adam_measured ? ", Adam-preconditioned B_adam " + noise_value(r.b_adam) : "", final));
  lines.push_back(
      fmt::format("McCandlish et al. 2018 with B_crit = {}: E(B) = {:.3g} (1 + B/{:.4g}) epochs, "
                  "S(B) = {:.4g} (1 + {:.4g}/B) steps; {:.0f} samples per epoch",
                  r.noise, m.e_min(), m.b_noise, m.s_min, m.b_noise, m.samples_per_epoch));
  lines.push_back(fmt::format(
      "global batch = N x {:g}{}; time = steps x predicted step time (training only: no "
      "evaluation or start-up); speedup against one worker ({:.2f} ms a step)",
      p.batch_per_worker,
      p.max_global_batch > 0 ? fmt::format(", at most {:g}", p.max_global_batch) : "",
      p.t1_s * 1e3));
  return lines;
}

}  // namespace

void print_tta(const TtaPrediction& p, std::ostream& out) {
  for (const std::string& line : tta_lines(p)) out << line << "\n";
  for (const TtaStrategy& s : p.strategies) {
    out << "\ntime to accuracy, strategy " << s.label << "\n";
    TextTable t({"N", "global batch", "epochs", "steps", "step ms", "time to target", "speedup",
                 "device-hours"},
                std::vector<Align>(8, Align::kRight));
    for (const TtaPoint& pt : s.points) {
      t.add_row({std::to_string(pt.workers), fmt::format("{:g}", pt.global_batch),
                 fmt::format("{:.3g}", pt.epochs), fmt::format("{:.0f}", pt.steps),
                 fmt::format("{:.2f}", pt.step_s * 1e3), duration(pt.time_s),
                 fmt::format("{:.2f}", pt.speedup), fmt::format("{:.3g}", pt.device_hours)});
    }
    t.print(out);
    const TtaPoint& fast = s.points[s.fastest];
    const TtaPoint& cheap = s.points[s.cheapest];
    out << fmt::format(
        "fastest: N = {} ({}, speedup {:.2f}); cheapest: N = {} ({:.3g} device-hours)\n",
        fast.workers, duration(fast.time_s), fast.speedup, cheap.workers, cheap.device_hours);
  }
}

nlohmann::json tta_json(const TtaPrediction& p) {
  const TtaRun& r = p.run;
  nlohmann::json strategies = nlohmann::json::array();
  for (const TtaStrategy& s : p.strategies) {
    nlohmann::json points = nlohmann::json::array();
    for (const TtaPoint& pt : s.points) {
      points.push_back({{"workers", pt.workers},
                        {"global_batch", pt.global_batch},
                        {"epochs", pt.epochs},
                        {"steps", pt.steps},
                        {"step_ms", pt.step_s * 1e3},
                        {"time_s", pt.time_s},
                        {"speedup", pt.speedup},
                        {"device_hours", pt.device_hours}});
    }
    strategies.push_back({{"strategy", s.label},
                          {"fastest_workers", s.points[s.fastest].workers},
                          {"cheapest_workers", s.points[s.cheapest].workers},
                          {"points", std::move(points)}});
  }
  return {
      {"run",
       {{"source", r.source},
        {"model", r.model},
        {"metric", r.metric},
        {"target", r.target},
        {"epochs", r.epochs},
        {"global_batch", r.global_batch},
        {"b_simple", r.b_simple > 0 ? nlohmann::json(r.b_simple) : nlohmann::json()},
        {"b_adam", r.b_adam > 0 ? nlohmann::json(r.b_adam) : nlohmann::json()},
        {"final_b_simple",
         r.final_b_simple > 0 ? nlohmann::json(r.final_b_simple) : nlohmann::json()},
        {"final_b_adam", r.final_b_adam > 0 ? nlohmann::json(r.final_b_adam) : nlohmann::json()},
        {"noise", r.noise},
        {"samples_per_epoch", r.samples_per_epoch}}},
      {"model",
       {{"s_min", r.model_fit.s_min},
        {"e_min", r.model_fit.e_min()},
        {"b_crit", r.model_fit.b_noise}}},
      {"batch_per_worker", p.batch_per_worker},
      {"max_global_batch", p.max_global_batch},
      {"t1_ms", p.t1_s * 1e3},
      {"strategies", std::move(strategies)}};
}

namespace {

/// `s` with only its points at `ns`, and its fastest and cheapest.
TtaStrategy thinned(const TtaStrategy& s, const std::vector<long long>& ns) {
  TtaStrategy out{s.label, {}, 0, 0};
  for (size_t i = 0; i < s.points.size(); ++i) {
    if (i != s.fastest && i != s.cheapest &&
        !std::binary_search(ns.begin(), ns.end(), s.points[i].workers)) {
      continue;
    }
    if (i == s.fastest) out.fastest = out.points.size();
    if (i == s.cheapest) out.cheapest = out.points.size();
    out.points.push_back(s.points[i]);
  }
  return out;
}

}  // namespace

std::string tta_html(const TtaPrediction& p, const std::vector<long long>& workers,
                     const std::vector<std::string>& header) {
  // Long N lists are thinned as predict's page thins them; the tables keep
  // each strategy's fastest and cheapest N.
  const std::vector<long long> ns = chart_points(workers);
  report::ChartSpec time{"Predicted time to target", "seconds", {}, {}, 0};
  report::ChartSpec speedup{"Speedup in time to target", "speedup", {}, {}, 1};
  for (long long n : ns) time.xs.push_back(static_cast<double>(n));
  speedup.xs = time.xs;
  TtaPrediction shown = p;
  for (TtaStrategy& s : shown.strategies) s = thinned(s, ns);
  for (const TtaStrategy& s : shown.strategies) {
    report::ChartLine t{s.label, {}, false}, u{s.label, {}, false};
    for (const TtaPoint& pt : s.points) {
      if (!std::binary_search(ns.begin(), ns.end(), pt.workers)) continue;
      t.points.emplace_back(static_cast<double>(pt.workers), pt.time_s);
      u.points.emplace_back(static_cast<double>(pt.workers), pt.speedup);
    }
    time.lines.push_back(std::move(t));
    speedup.lines.push_back(std::move(u));
  }
  std::vector<std::string> notes = header;
  for (const std::string& line : tta_lines(p)) notes.push_back(line);
  std::ostringstream tables;
  print_tta(shown, tables);
  return report::render_chart_page(
      "dlscale predict --tta: " + p.run.model, notes, {time, speedup},
      "<h2>Tables</h2>\n<pre>" + report::html_escape(tables.str()) + "</pre>\n");
}

}  // namespace dlscale::predict
