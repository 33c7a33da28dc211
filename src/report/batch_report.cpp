// report --type batch: steps and epochs to target against the global batch
// (examples/batch-scaling.yaml), McCandlish et al.'s model fitted to them,
// and what the smallest batch's noise scale alone predicts for the others.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "core/error.h"
#include "core/record_keys.h"
#include "core/stats.h"
#include "report/report_parts.h"

namespace dlscale::report {

namespace {

/// Parameters a batch study changes with the global batch: runs that differ
/// only in these (and in seed) are points of one curve. The synthetic pool
/// is counted in global batches, so a study keeps its training set fixed by
/// varying it with the batch.
// noise-final: a study measures a fixed number of samples at the final
// weights, so its batches' count varies with the batch, as the pool's does.
const std::set<std::string> kBatchAxes = {"global-batch",      "batch",       "accumulate",
                                          "synthetic-batches", "noise-final", "seed"};

std::optional<double> metric_of(const sweep::RepeatRecord& r, const std::string& name) {
  const auto it = r.metrics.find(name);
  if (it == r.metrics.end() || !std::isfinite(it->second)) return std::nullopt;
  return it->second;
}

/// What the repeats of one global batch measured, before their medians.
struct Samples {
  std::vector<double> steps, epochs;
  /// By metric: noise_b_simple, noise_adam_b_simple and their final ones.
  std::map<std::string, std::vector<double>> noise;
};

const char* const kNoiseMetrics[] = {
    record::metric::kNoiseBSimple, record::metric::kNoiseAdamBSimple,
    record::metric::kNoiseFinalBSimple, record::metric::kNoiseFinalAdamBSimple};

/// Adds the completed repeats of `run` that trained to a target to `point`.
void add_repeats(const RunRecord& run, BatchPoint& point, Samples& samples) {
  const std::string conv = record::metric::kConvergencePrefix;
  for (const sweep::RepeatRecord& r : run.repeats) {
    const auto success = metric_of(r, record::metric::kConvergenceSuccess);
    if (r.status != sweep::kStatusCompleted || !success) continue;
    ++point.runs;
    for (const char* name : kNoiseMetrics) {
      if (const auto b = metric_of(r, name)) samples.noise[name].push_back(*b);
    }
    const auto s = metric_of(r, conv + "steps_done"), e = metric_of(r, conv + "epochs_to_target");
    if (*success <= 0 || !s || !e || *s <= 0 || *e <= 0) continue;
    ++point.reached;
    samples.steps.push_back(*s);
    samples.epochs.push_back(*e);
  }
}

/// The median of `samples`' noise metric `name`, or none.
std::optional<double> median_of(const Samples& samples, const char* name) {
  const auto it = samples.noise.find(name);
  if (it == samples.noise.end() || it->second.empty()) return std::nullopt;
  return median(it->second);
}

/// The fit of the measured curve and the model through the smallest batch
/// that reached its target and measured a positive noise scale: Adam's
/// preconditioned one where the runs measured it (docs/convergence.md).
void model_study(BatchStudy& study) {
  std::vector<StepsPoint> measured;
  std::vector<double> per_epoch;
  for (const BatchPoint& p : study.points) {
    if (!p.steps) continue;
    measured.push_back({p.global_batch, *p.steps});
    per_epoch.push_back(p.samples_per_epoch);
  }
  if (measured.empty()) {
    study.fit.why = "no global batch reached the target";
    return;
  }
  study.samples_per_epoch = median(per_epoch);
  study.fit = fit_steps(measured, study.samples_per_epoch);
  for (const BatchPoint& p : study.points) {
    if (!p.epochs) continue;
    const std::pair<std::optional<double>, const char*> choices[] = {
        {p.final_b_adam, "final B_adam"},
        {p.final_b_simple, "final B_simple"},
        {p.b_adam, "B_adam"},
        {p.b_simple, "B_simple"}};
    for (const auto& [b, name] : choices) {
      if (!b || !(*b > 0)) continue;
      study.base_noise = name;
      study.base_batch = p.global_batch;
      study.from_base = model_from_run(*p.epochs, p.global_batch, *b, p.samples_per_epoch);
      return;
    }
  }
}

Cell optional_number(const std::optional<double>& v, const char* spec) {
  return v ? number(*v, spec) : Cell{"", {}};
}

}  // namespace

std::vector<BatchStudy> batch_studies(const std::vector<RunRecord>& runs) {
  std::vector<BatchStudy> studies;
  std::map<std::vector<std::pair<std::string, std::string>>, size_t> index;
  std::map<std::pair<size_t, double>, std::vector<const RunRecord*>> by_batch;
  for (const LabelledRun& r :
       labelled_runs(runs, record::metric::kConvergenceSuccess, kBatchAxes)) {
    const auto [it, added] = index.try_emplace(r.labels, studies.size());
    if (added) {
      studies.emplace_back();
      studies.back().labels = r.labels;
    }
    const Params& p = r.run->params;
    const double b =
        p.count("global-batch") ? static_cast<double>(sweep::param_int(p, "global-batch")) : 0;
    if (b > 0) by_batch[{it->second, b}].push_back(r.run);
  }
  for (const auto& [key, group] : by_batch) {
    BatchPoint point;
    point.global_batch = key.second;
    Samples samples;
    for (const RunRecord* run : group) add_repeats(*run, point, samples);
    if (!samples.steps.empty()) {
      point.steps = median(samples.steps);
      point.epochs = median(samples.epochs);
      point.samples_per_epoch = *point.steps * point.global_batch / *point.epochs;
    }
    point.b_simple = median_of(samples, record::metric::kNoiseBSimple);
    point.b_adam = median_of(samples, record::metric::kNoiseAdamBSimple);
    point.final_b_simple = median_of(samples, record::metric::kNoiseFinalBSimple);
    point.final_b_adam = median_of(samples, record::metric::kNoiseFinalAdamBSimple);
    studies[key.first].points.push_back(point);
  }
  for (BatchStudy& s : studies) model_study(s);
  studies.erase(std::remove_if(studies.begin(), studies.end(),
                               [](const BatchStudy& s) { return s.points.empty(); }),
                studies.end());
  return studies;
}

namespace {

/// The notes of one study: the fitted model, the noise scale's critical
/// batch beside it, and how far the smallest batch's prediction was off.
void study_notes(const BatchStudy& s, Report& rep) {
  const std::string name = series_name(s.labels);
  if (s.fit.ok) {
    const BatchModel& m = s.fit.model;
    rep.notes.push_back(
        fmt::format("{}: fitted S_min {:.4g} steps, E_min {:.3g} epochs, B_crit {:.4g} (rms error "
                    "of the fit {:.1f}%)",
                    name, m.s_min, m.e_min(), m.b_noise, 100 * s.fit.rms_relative_error));
  } else {
    rep.notes.push_back(fmt::format("{}: no fit: {}", name, s.fit.why));
  }
  if (!s.from_base) return;
  std::vector<double> errors;
  for (const BatchPoint& p : s.points) {
    if (p.epochs && p.global_batch != s.base_batch) {
      errors.push_back(std::fabs(s.from_base->epochs(p.global_batch) / *p.epochs - 1));
    }
  }
  const char* noise = s.base_noise.c_str();
  std::string line =
      fmt::format("{}: {} at B0 = {:g}: {:.4g}", name, noise, s.base_batch, s.from_base->b_noise);
  if (s.fit.ok)
    line += fmt::format(" (fitted B_crit / {} = {:.2f})", noise,
                        s.fit.model.b_noise / s.from_base->b_noise);
  if (!errors.empty()) {
    line +=
        fmt::format("; epochs predicted from B0 alone: median |error| {:.0f}%, largest {:.0f}%",
                    100 * median(errors), 100 * *std::max_element(errors.begin(), errors.end()));
  }
  rep.notes.push_back(line);
}

}  // namespace

Report batch_report(const std::vector<RunRecord>& runs) {
  const std::vector<BatchStudy> studies = batch_studies(runs);
  DLSCALE_CHECK(!studies.empty(),
                "no run in the selection trained to a target (--target-accuracy), so there are "
                "no steps to target to set against the global batch");
  Report rep;
  rep.title =
      "Steps and epochs to target against the global batch (McCandlish et al. 2018: "
      "S = S_min (1 + B_crit/B), E = E_min (1 + B/B_crit))";
  // The final weights' noise scales (train --noise-final) only where a run measured them.
  const bool finals = std::any_of(studies.begin(), studies.end(), [](const BatchStudy& s) {
    return std::any_of(s.points.begin(), s.points.end(),
                       [](const BatchPoint& p) { return p.final_b_simple || p.final_b_adam; });
  });
  std::vector<std::pair<std::string, std::string>> columns = {
      {"reached", "reached"}, {"runs", "runs"},         {"steps", "steps"},
      {"epochs", "epochs"},   {"B_simple", "b_simple"}, {"B_adam", "b_adam"}};
  if (finals) {
    columns.insert(columns.end(),
                   {{"final B_simple", "final_b_simple"}, {"final B_adam", "final_b_adam"}});
  }
  columns.insert(columns.end(), {{"steps fitted", "steps_fitted"},
                                 {"epochs from B0", "epochs_from_b0"},
                                 {"error %", "error_pct"}});
  Table t = per_run_tables(rep, studies.front().labels, {"global batch"}, columns);
  const size_t batch_column = studies.front().labels.size();
  t.numeric[batch_column] = true;
  rep.data.numeric[batch_column] = true;
  for (const BatchStudy& s : studies) {
    for (const BatchPoint& p : s.points) {
      std::vector<Cell> cells, data;
      for (const auto& [k, v] : s.labels) cells.push_back({v, {}});
      data = cells;
      // Each figure: as people read it, and with every digit for programs.
      const auto add = [&](const std::optional<double>& v, const char* spec) {
        cells.push_back(optional_number(v, spec));
        data.push_back(optional_number(v, "{:.9g}"));
      };
      add(p.global_batch, "{:.0f}");
      add(p.reached, "{:.0f}");
      add(p.runs, "{:.0f}");
      add(p.steps, "{:.0f}");
      add(p.epochs, "{:.2f}");
      add(p.b_simple, "{:.4g}");
      add(p.b_adam, "{:.4g}");
      if (finals) {
        add(p.final_b_simple, "{:.4g}");
        add(p.final_b_adam, "{:.4g}");
      }
      add(s.fit.ok ? std::optional<double>(s.fit.model.steps(p.global_batch)) : std::nullopt,
          "{:.0f}");
      const std::optional<double> predicted =
          s.from_base ? std::optional<double>(s.from_base->epochs(p.global_batch)) : std::nullopt;
      add(predicted, "{:.2f}");
      add(predicted && p.epochs ? std::optional<double>(100 * (*predicted / *p.epochs - 1))
                                : std::nullopt,
          "{:+.0f}");
      t.rows.push_back(std::move(cells));
      rep.data.rows.push_back(std::move(data));
    }
    study_notes(s, rep);
  }
  rep.notes.push_back(
      "steps and epochs are medians over the runs (seeds, repeats) that reached the target; "
      "B_simple is the median noise scale the runs measured (train --noise-scale), B_adam that "
      "of Adam's preconditioned gradient (runs with Adam); the final ones were measured at the "
      "final weights (train --noise-final), and B0's model takes them where there are any");
  rep.notes.push_back(
      "epochs from B0: E(B) = E0 (1 + B/B0_noise)/(1 + B0/B0_noise) from the smallest batch's "
      "epochs and noise scale alone: its final B_adam, final B_simple, B_adam or B_simple, the "
      "first measured (predict --tta's model; docs/predict.md)");
  rep.tables.push_back(std::move(t));
  return rep;
}

}  // namespace dlscale::report
