#include "report/tta_report.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "core/record_keys.h"
#include "core/stats.h"

namespace dlscale::report {
namespace {

using sweep::RunRecord;

/// Parameters that are the table's axes, steer the sweep, only name a
/// run's output files, or measure after its last step (noise-final): runs
/// differing only in these are the same configuration (seeds and repeats of it).
const std::set<std::string> kTtaNotLabels = {"workers",
                                             "batch",
                                             "global-batch",
                                             "scaling",
                                             "repeats",
                                             "timeout",
                                             "command",
                                             "launcher-args",
                                             "throughput-pattern",
                                             "model",
                                             "seed",
                                             "mllog",
                                             "checkpoint",
                                             "trace",
                                             "save-weights",
                                             "json",
                                             "save-initial-weights",
                                             "noise-final"};

/// The accuracy a run's target is on is its task's first metric, which the
/// record names (results.convergence.metric, and final_accuracy). Records
/// written before it did: the first of the zoo tasks' metrics they hold.
constexpr const char* kLegacyAccuracyMetrics[] = {"top1", "token_acc", "hr10", "box_acc"};

/// A convergence metric of the repeat ("run_s" is stored as "conv_run_s").
std::optional<double> conv_metric(const sweep::RepeatRecord& r, const std::string& key) {
  const auto it = r.metrics.find(record::metric::kConvergencePrefix + key);
  if (it == r.metrics.end()) return std::nullopt;
  return it->second;
}

/// The repeat as a run of the report, when it completed and evaluated.
std::optional<TtaRun> tta_run(const RunRecord& run, const sweep::RepeatRecord& rep) {
  if (rep.status != sweep::kStatusCompleted || !conv_metric(rep, "run_s")) return std::nullopt;
  TtaRun t;
  t.run = &run;
  t.repeat = &rep;
  if (const auto success = rep.metrics.find(record::metric::kConvergenceSuccess);
      success != rep.metrics.end())
    t.status = success->second > 0 ? "success" : "aborted";
  if (t.status == "success") {
    t.time_to_accuracy_s = conv_metric(rep, "time_to_accuracy_s");
    t.epochs_to_target = conv_metric(rep, "epochs_to_target");
  }
  t.final_accuracy = conv_metric(rep, record::kConvergenceFinalAccuracy);
  for (const char* name : kLegacyAccuracyMetrics) {
    if (!t.final_accuracy) t.final_accuracy = conv_metric(rep, std::string("final_") + name);
  }
  return t;
}

/// Counts, the olympic mean and the spread of one row's runs.
void summarize_row(TtaRow& row) {
  std::vector<double> times, epochs, accuracy;
  for (const TtaRun& t : row.runs) {
    row.aborted += t.status == "aborted" ? 1 : 0;
    if (t.time_to_accuracy_s) times.push_back(*t.time_to_accuracy_s);
    if (t.epochs_to_target) epochs.push_back(*t.epochs_to_target);
    if (t.final_accuracy) accuracy.push_back(*t.final_accuracy);
  }
  row.successes = static_cast<int>(times.size());
  if (!times.empty()) {
    row.time_to_accuracy_s = olympic_mean(times);
    row.time_min_s = *std::min_element(times.begin(), times.end());
    row.time_max_s = *std::max_element(times.begin(), times.end());
  }
  if (!epochs.empty()) row.epochs_to_target = mean(epochs);
  if (!accuracy.empty()) row.final_accuracy = mean(accuracy);
}

/// Speedup in time to train against the fewest workers that reached the
/// target; `rows` is one configuration, ascending in workers.
void add_speedups(std::vector<TtaRow>& rows) {
  const auto base =
      std::find_if(rows.begin(), rows.end(), [](const TtaRow& r) { return r.time_to_accuracy_s; });
  if (base == rows.end()) return;
  for (TtaRow& r : rows) {
    r.base_workers = base->workers;
    if (r.time_to_accuracy_s && *r.time_to_accuracy_s > 0)
      r.speedup = *base->time_to_accuracy_s / *r.time_to_accuracy_s;
  }
}

/// A configuration: runs equal but for workers (and the global batch that
/// follows from them), seed and repeat.
struct Config {
  std::vector<std::string> key;
  std::vector<std::pair<std::string, std::string>> labels;
  std::map<int, TtaRow> by_workers;
};

std::string selection_sweeps(const std::vector<RunRecord>& runs) {
  std::vector<std::string> names;
  for (const RunRecord& r : runs) {
    const std::string n = "'" + r.sweep + "'";
    if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
  }
  return fmt::format("{} {}", names.size() == 1 ? "sweep" : "sweeps", fmt::join(names, ", "));
}

Cell number(double v, const char* spec) { return {fmt::format(fmt::runtime(spec), v), v}; }

Cell optional_cell(const std::optional<double>& v, const char* spec, double scale = 1,
                   const char* none = "-") {
  return v ? number(*v * scale, spec) : Cell{none, {}};
}

void add_column(Table& t, const std::string& header, bool numeric) {
  t.headers.push_back(header);
  t.numeric.push_back(numeric);
}

/// The people's table: a row per TtaRow.
Table tta_table(const std::vector<TtaRow>& rows, const std::string& title) {
  Table t;
  t.title = title;
  for (const auto& [name, unused] : rows.front().labels) add_column(t, name, false);
  for (const char* h : {"workers", "global batch", "runs", "aborted", "time to accuracy (s)",
                        "spread (s)", "epochs to target", "final accuracy (%)", "speedup"}) {
    add_column(t, h, true);
  }
  for (const TtaRow& r : rows) {
    std::vector<Cell> cells;
    for (const auto& [unused, value] : r.labels) cells.push_back({value, {}});
    cells.push_back(number(r.workers, "{:.0f}"));
    cells.push_back(number(static_cast<double>(r.global_batch), "{:.0f}"));
    cells.push_back(number(static_cast<double>(r.runs.size()), "{:.0f}"));
    cells.push_back(number(r.aborted, "{:.0f}"));
    cells.push_back(optional_cell(r.time_to_accuracy_s, "{:.2f}"));
    cells.push_back(r.successes >= 2
                        ? Cell{fmt::format("{:.2f}–{:.2f}", r.time_min_s, r.time_max_s), {}}
                        : Cell{"-", {}});
    cells.push_back(optional_cell(r.epochs_to_target, "{:.2f}"));
    cells.push_back(optional_cell(r.final_accuracy, "{:.2f}", 100));
    cells.push_back(optional_cell(r.speedup, "{:.2f}"));
    t.rows.push_back(std::move(cells));
  }
  return t;
}

/// The programs' table: the same rows with plain numbers.
Table tta_data(const std::vector<TtaRow>& rows, const std::string& title) {
  Table d;
  d.title = title;
  for (const auto& [name, unused] : rows.front().labels) add_column(d, name, false);
  for (const char* h : {"workers", "global_batch", "runs", "successes", "aborted",
                        "time_to_accuracy_s", "time_to_accuracy_min_s", "time_to_accuracy_max_s",
                        "epochs_to_target", "final_accuracy", "speedup", "base_workers"}) {
    add_column(d, h, true);
  }
  for (const TtaRow& r : rows) {
    std::vector<Cell> cells;
    for (const auto& [unused, value] : r.labels) cells.push_back({value, {}});
    const bool reached = r.time_to_accuracy_s.has_value();
    for (double v : {static_cast<double>(r.workers), static_cast<double>(r.global_batch),
                     static_cast<double>(r.runs.size()), static_cast<double>(r.successes),
                     static_cast<double>(r.aborted)}) {
      cells.push_back(number(v, "{:.0f}"));
    }
    cells.push_back(optional_cell(r.time_to_accuracy_s, "{:.6g}", 1, ""));
    cells.push_back(reached ? number(r.time_min_s, "{:.6g}") : Cell{"", {}});
    cells.push_back(reached ? number(r.time_max_s, "{:.6g}") : Cell{"", {}});
    cells.push_back(optional_cell(r.epochs_to_target, "{:.6g}", 1, ""));
    cells.push_back(optional_cell(r.final_accuracy, "{:.6g}", 1, ""));
    cells.push_back(optional_cell(r.speedup, "{:.6g}", 1, ""));
    cells.push_back(r.base_workers > 0 ? number(r.base_workers, "{:.0f}") : Cell{"", {}});
    d.rows.push_back(std::move(cells));
  }
  return d;
}

}  // namespace

std::vector<TtaRow> tta_rows(const std::vector<RunRecord>& runs) {
  std::vector<std::pair<const RunRecord*, std::vector<TtaRun>>> selected;
  for (const RunRecord& r : runs) {
    std::vector<TtaRun> found;
    for (const sweep::RepeatRecord& rep : r.repeats) {
      if (auto t = tta_run(r, rep)) found.push_back(*t);
    }
    if (!found.empty()) selected.emplace_back(&r, std::move(found));
  }
  std::vector<const sweep::Params*> params;
  std::set<std::string> modes;
  for (const auto& [r, unused] : selected) {
    params.push_back(&r->params);
    modes.insert(sweep::param_text(r->params, "scaling", "weak"));
  }
  const std::vector<std::string> extra = sweep::varying_params(params, kTtaNotLabels);
  std::vector<Config> configs;
  for (const auto& entry : selected) {
    const RunRecord* r = entry.first;
    const std::vector<TtaRun>& found = entry.second;
    const auto text = [&](const std::string& name) {
      return sweep::param_text(r->params, name, "-");
    };
    Config c;
    c.labels = {{"model", text("model")}};
    if (modes.size() > 1) c.labels.emplace_back("scaling", text("scaling"));
    for (const std::string& e : extra) c.labels.emplace_back(e, text(e));
    for (const auto& [unused, v] : c.labels) c.key.push_back(v);
    // The batch the scaling mode holds fixed tells configurations apart
    // (its column is the global batch, which grows with weak scaling).
    c.key.push_back(text("scaling") == "strong" ? text("global-batch") : text("batch"));
    auto it = std::find_if(configs.begin(), configs.end(),
                           [&](const Config& x) { return x.key == c.key; });
    if (it == configs.end()) it = configs.insert(configs.end(), std::move(c));
    const int workers = static_cast<int>(sweep::param_int(r->params, "workers"));
    TtaRow& row = it->by_workers[workers];
    row.labels = it->labels;
    row.workers = workers;
    row.global_batch =
        r->params.count("global-batch") ? sweep::param_int(r->params, "global-batch") : 0;
    row.runs.insert(row.runs.end(), found.begin(), found.end());
  }
  std::vector<TtaRow> out;
  for (Config& c : configs) {
    std::vector<TtaRow> rows;
    for (auto& [unused, row] : c.by_workers) {
      summarize_row(row);
      rows.push_back(std::move(row));
    }
    add_speedups(rows);
    out.insert(out.end(), rows.begin(), rows.end());
  }
  return out;
}

Report tta_report(const std::vector<RunRecord>& runs) {
  const std::vector<TtaRow> rows = tta_rows(runs);
  DLSCALE_CHECK(!rows.empty(),
                "no run of {} evaluated accuracy (--type tta needs runs trained with "
                "--epochs, --eval-every or --target-accuracy; docs/convergence.md)",
                selection_sweeps(runs));
  Report rep;
  rep.title = "Time to accuracy against workers (MLPerf olympic mean)";
  rep.notes.push_back(
      "time to accuracy = the olympic mean of the successful runs' times (MLPerf: the fastest "
      "and the slowest dropped; the plain mean of fewer than 3); spread = their min-max");
  rep.notes.push_back(
      "runs = completed runs that evaluated, over seeds and repeats; aborted = runs that ended "
      "without reaching the target");
  rep.notes.push_back(
      "epochs to target: mean of the successful runs; final accuracy: the task's first metric (top-1, token "
      "accuracy, HR@10, box accuracy, ...), mean of all runs");
  rep.notes.push_back(
      "speedup = time to accuracy of the fewest workers that reached the target / time to "
      "accuracy");
  rep.tables.push_back(tta_table(rows, rep.title));
  rep.data = tta_data(rows, rep.title);
  return rep;
}

const TtaRun& representative_run(const TtaRow& row) {
  DLSCALE_ASSERT(!row.runs.empty());
  // The median by time to accuracy, or by final accuracy when none succeeded.
  const bool any_success = row.successes > 0;
  const auto key = [&](const TtaRun& t) {
    return any_success ? t.time_to_accuracy_s : t.final_accuracy;
  };
  std::vector<const TtaRun*> ranked;
  for (const TtaRun& t : row.runs) {
    if (key(t)) ranked.push_back(&t);
  }
  if (ranked.empty()) return row.runs.front();
  std::stable_sort(ranked.begin(), ranked.end(),
                   [&](const TtaRun* a, const TtaRun* b) { return *key(*a) < *key(*b); });
  return *ranked[(ranked.size() - 1) / 2];
}

std::vector<EvalPoint> convergence_evals(const sweep::RepeatRecord& repeat) {
  const nlohmann::json j = nlohmann::json::parse(repeat.record, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return {};
  const nlohmann::json* convergence = &j;
  for (const char* key : {record::kResults, record::kConvergence}) {
    if (!convergence->is_object() || !convergence->contains(key)) return {};
    convergence = &(*convergence)[key];
  }
  if (!convergence->is_object() || !convergence->contains(record::kConvergenceEvals)) return {};
  const nlohmann::json& evals = (*convergence)[record::kConvergenceEvals];
  std::vector<std::string> metrics(std::begin(kLegacyAccuracyMetrics), std::end(kLegacyAccuracyMetrics));
  if (const auto named = convergence->find(record::kConvergenceMetric);
      named != convergence->end() && named->is_string()) {
    metrics = {named->get<std::string>()};
  }
  std::vector<EvalPoint> out;
  if (!evals.is_array()) return out;
  for (const nlohmann::json& e : evals) {
    const auto num = [&](const std::string& k) { return e.is_object() && e.contains(k) && e[k].is_number(); };
    const auto metric = std::find_if(metrics.begin(), metrics.end(), num);
    if (!num("epoch") || !num("run_seconds") || metric == metrics.end()) continue;
    out.push_back({e["epoch"].get<double>(), e["run_seconds"].get<double>(), e[*metric].get<double>()});
  }
  return out;
}

}  // namespace dlscale::report
