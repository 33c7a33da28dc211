#include "predict/predict_report.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/record_keys.h"
#include "core/stats.h"
#include "predict/system_file.h"
#include "predict/workload.h"
#include "report/report_parts.h"

namespace dlscale::predict {
namespace input = record::input;

nlohmann::json stored_train_record(const sweep::RunRecord& run) {
  for (const sweep::RepeatRecord& r : run.repeats) {
    if (r.status != sweep::kStatusCompleted || r.record.empty()) continue;
    nlohmann::json j = nlohmann::json::parse(r.record, nullptr, false);
    if (j.is_object() && j.value(record::kKind, "") == record::kKindTrain &&
        j.contains(record::kInputs))
      return j;
  }
  return nullptr;
}

namespace {

struct Checked {
  std::string model, link, strategy, bottleneck;
  long long workers = 0;
  double measured = 0, predicted = 0;
};

/// What a shaped hop of `mbit` delivers: measured, else nominal.
double shaped_rate(const SweepCheckInputs& in, double mbit) {
  const auto it = in.shaped_bytes_per_s.find(mbit);
  return it != in.shaped_bytes_per_s.end() ? it->second : mbit * 1e6 / 8;
}

/// The network a run's record describes: its emulated cluster's shaped
/// link, workers per host and racks (a shaped uplink is the fabric) over
/// the base.
Network run_network(const nlohmann::json& inputs, const SweepCheckInputs& in, std::string& link) {
  Network n = in.base;
  const nlohmann::json& cluster =
      inputs.contains(input::kCluster) ? inputs[input::kCluster] : nlohmann::json();
  if (cluster.is_object()) {
    n.workers_per_node = cluster.value(input::kClusterWorkersPerHost, 1);
    const double mbit = cluster.value(input::kClusterLinkMbit, 0.0);
    if (mbit > 0) n.inter.set_rate(shaped_rate(in, mbit));  // full duplex: one way as both
    link = mbit > 0 ? fmt::format("{:g} Mbit/s", mbit) : "unshaped";
    const int rack = cluster.value(input::kClusterRackHosts, 0);
    const double uplink = cluster.value(input::kClusterUplinkMbit, 0.0);
    if (rack > 0 && uplink > 0) {
      n.fabric = {rack, shaped_rate(in, uplink)};
      link += fmt::format(", racks of {} at {:g} Mbit/s", rack, uplink);
    }
  } else {
    n.workers_per_node = std::max(1, inputs.value(input::kWorldSize, 1));
    link = "one host";
  }
  return n;
}

/// What the scaling model predicts for one completed run of a trained
/// model: its step at its workers, batch, strategy, threads and link.
struct RunPrediction {
  std::string model, link, strategy;
  long long workers = 0;
  nlohmann::json record;
  StepPrediction step;
};

/// Null for a run without a stored train record, of `independent`, with
/// --accumulate (the predictor models one forward and backward per step),
/// or of fewer than `min_workers`. Throws dlscale::Error when no
/// calibration measured its model.
std::optional<RunPrediction> predict_run(const sweep::RunRecord& run, nlohmann::json record,
                                         const SweepCheckInputs& in, long long min_workers) {
  RunPrediction r;
  r.record = std::move(record);
  if (r.record.is_null()) return std::nullopt;
  const nlohmann::json& inputs = r.record[record::kInputs];
  r.workers = inputs.value(input::kWorldSize, 1);
  r.model = inputs.value(input::kModel, "");
  r.strategy = strategy_of_record(inputs);
  if (r.workers < min_workers || r.strategy.empty() ||
      inputs.value(input::kAccumulate, int64_t{1}) != 1) {
    return std::nullopt;
  }
  const auto of_model = [&](const std::vector<Workload>& list) {
    return std::find_if(list.begin(), list.end(),
                        [&](const Workload& w) { return w.model == r.model; });
  };
  auto cal = of_model(in.calibrations);
  DLSCALE_CHECK(cal != in.calibrations.end(),
                "run {} trained {}, but no --calibrate record measured it", run.id, r.model);
  const Network n = run_network(inputs, in, r.link);
  PredictOptions o;
  o.workers = {r.workers};
  o.batch = inputs.value(input::kBatch, 0);
  o.bucket_mb = inputs.value(input::kBucketMb, 25.0);
  o.first_bucket_mb = inputs.value(input::kFirstBucketMb, 1.0);
  o.threads_per_worker = inputs.value(input::kThreads, 1);
  const nlohmann::json& env =
      r.record.contains(record::kEnvironment) ? r.record[record::kEnvironment] : nlohmann::json();
  o.shared_cores = in.shared_cores > 0 ? in.shared_cores
                   : env.is_object()   ? env.value(record::kOnlineCores, 0)
                                       : 0;
  o.copy_bytes_per_s = in.copy_bytes_per_s;
  o.wire16_copy_bytes_per_s = in.wire16_copy_bytes_per_s;
  if (const auto busy = of_model(in.busy_calibrations); busy != in.busy_calibrations.end()) {
    o.busy = std::make_shared<const Workload>(*busy);
  }
  r.step = predict(*cal, n, {parse_strategy(r.strategy)}, o).strategies[0].points[0];
  return r;
}

/// One note per --calibrate-busy record: whose runs compute at its times.
void add_busy_notes(report::Report& rep, const SweepCheckInputs& in) {
  for (const Workload& w : in.busy_calibrations) {
    rep.notes.push_back(fmt::format("{} (runs of {} or more workers): compute {}", w.model,
                                    busy_from_workers(w), w.source));
  }
}

std::optional<Checked> check_run(const sweep::RunRecord& run, const SweepCheckInputs& in) {
  const auto measured = report::median_metric(run, record::metric::kSamplesPerSec);
  if (!measured) return std::nullopt;
  const auto p = predict_run(run, stored_train_record(run), in, 2);
  if (!p) return std::nullopt;
  Checked c;
  c.model = p->model;
  c.link = p->link;
  c.strategy = p->strategy;
  c.workers = p->workers;
  c.measured = *measured;
  c.predicted = p->step.throughput;
  c.bottleneck = p->step.bottleneck;
  return c;
}

/// A run of the --tta record's model and target: measured against
/// predicted steps and training time to that target.
struct TtaChecked {
  RunPrediction p;
  long long id = 0, seed = 0;
  double global_batch = 0;
  bool reached = false, base = false;
  double steps = 0, train_s = 0, tta_s = 0;  ///< measured, when reached
  double steps_predicted = 0, train_s_predicted = 0;
};

/// Whether `conv` trained to the --tta run's metric and target.
bool same_target(const nlohmann::json& conv, const TtaRun& tta) {
  return conv.is_object() && conv.value(record::kConvergenceMetric, "accuracy") == tta.metric &&
         std::fabs(conv.value("target", 0.0) - tta.target) <= 1e-9 * std::max(1.0, tta.target);
}

std::optional<TtaChecked> check_tta_run(const sweep::RunRecord& run, const SweepCheckInputs& in,
                                        const TtaRun& tta, const nlohmann::json& tta_record) {
  nlohmann::json record = stored_train_record(run);
  if (record.is_null() || record[record::kInputs].value(input::kModel, "") != tta.model ||
      !same_target(convergence_of(record), tta)) {
    return std::nullopt;  // another model or target
  }
  auto p = predict_run(run, std::move(record), in, 1);
  if (!p) return std::nullopt;
  const nlohmann::json& conv = convergence_of(p->record);
  const nlohmann::json& inputs = p->record[record::kInputs];
  TtaChecked c;
  c.id = run.id;
  c.seed = inputs.value(input::kSeed, 0LL);
  c.global_batch = inputs.value(input::kBatch, 0.0) * static_cast<double>(p->workers);
  c.reached = conv.value(record::kConvergenceStatus, "") == record::kStatusSuccess;
  c.base = inputs == tta_record.value(record::kInputs, nlohmann::json()) &&
           conv.value("run_s", -1.0) == convergence_of(tta_record).value("run_s", -2.0);
  if (c.reached) {
    c.steps = conv.value("steps_done", 0.0);
    c.tta_s = conv.value("time_to_accuracy_s", 0.0);
    c.train_s = c.tta_s - conv.value("eval_s", 0.0) - conv.value("checkpoint_s", 0.0);
    c.reached = c.steps > 0 && c.train_s > 0;  // else a record with nothing to compare
  }
  c.steps_predicted = tta.model_fit.steps(c.global_batch);
  c.train_s_predicted = c.steps_predicted * p->step.step_s;
  c.p = std::move(*p);
  return c;
}

/// Signed error of `predicted` against `measured`, in %.
double error_pct(double predicted, double measured) {
  return 100 * (predicted - measured) / measured;
}

void add_tta_row(report::Report& rep, report::Table& t, const TtaChecked& c) {
  const auto optional = [&](double v, const char* spec) {
    return c.reached ? report::number(v, spec) : report::Cell{"", {}};
  };
  const double steps_error = c.reached ? error_pct(c.steps_predicted, c.steps) : 0;
  const double time_error = c.reached ? error_pct(c.train_s_predicted, c.train_s) : 0;
  t.rows.push_back({{fmt::format("{}{}", c.id, c.base ? " (B0)" : ""), static_cast<double>(c.id)},
                    {std::to_string(c.p.workers), static_cast<double>(c.p.workers)},
                    {c.p.strategy, {}},
                    {c.p.link, {}},
                    report::number(c.global_batch, "{:g}"),
                    {std::to_string(c.seed), static_cast<double>(c.seed)},
                    c.reached ? report::number(c.steps, "{:.0f}") : report::Cell{"not reached", {}},
                    report::number(c.steps_predicted, "{:.0f}"),
                    optional(c.train_s, "{:.1f}"),
                    report::number(c.train_s_predicted, "{:.1f}"),
                    optional(time_error, "{:+.1f}")});
  std::vector<report::Cell> d = t.rows.back();
  d[0] = {std::to_string(c.id), static_cast<double>(c.id)};
  d.push_back({c.base ? "true" : "false", {}});
  d.push_back(optional(c.tta_s, "{:.3f}"));
  d.push_back(optional(steps_error, "{:+.1f}"));
  rep.data.rows.push_back(std::move(d));
}

/// "median |error| 12.3%, largest 45.6%; 7 of 9 within 25%", or why none.
std::string error_summary(std::vector<double> errors) {
  if (errors.empty()) return "none reached the target besides the --tta record's own run";
  const auto within = std::count_if(errors.begin(), errors.end(), [](double e) { return e <= 25; });
  return fmt::format("median |error| {:.1f}%, largest {:.1f}%; {} of {} within 25%", median(errors),
                     *std::max_element(errors.begin(), errors.end()), within, errors.size());
}

/// The runs of one configuration (workers, strategy, link, global batch),
/// the --tta record's own run left out, and their medians against the
/// prediction they share: the protocol (the median of the seeds).
report::Table tta_configurations(const std::vector<TtaChecked>& rows,
                                 std::vector<double>& step_errors,
                                 std::vector<double>& time_errors) {
  report::Table t;
  t.title =
      "By configuration: medians over the seeds that reached the target (B0's own run left out)";
  t.headers = {"workers",         "strategy",      "link",       "global batch", "reached", "steps",
               "predicted steps", "steps error %", "training s", "predicted s",  "error %"};
  t.numeric = {true, false, false, true, true, true, true, true, true, true, true};
  std::vector<const TtaChecked*> done;
  for (const TtaChecked& first : rows) {
    const auto same = [&](const TtaChecked* c) {
      return c->p.workers == first.p.workers && c->p.strategy == first.p.strategy &&
             c->p.link == first.p.link && c->global_batch == first.global_batch;
    };
    if (first.base || std::any_of(done.begin(), done.end(), same)) continue;
    done.push_back(&first);
    std::vector<double> steps, train_s;
    int runs = 0;
    for (const TtaChecked& c : rows) {
      if (c.base || !same(&c)) continue;
      ++runs;
      if (!c.reached) continue;
      steps.push_back(c.steps);
      train_s.push_back(c.train_s);
    }
    std::vector<report::Cell> row = {
        {std::to_string(first.p.workers), static_cast<double>(first.p.workers)},
        {first.p.strategy, {}},
        {first.p.link, {}},
        report::number(first.global_batch, "{:g}"),
        {fmt::format("{}/{}", steps.size(), runs), static_cast<double>(steps.size())},
        {},
        report::number(first.steps_predicted, "{:.0f}"),
        {},
        {},
        report::number(first.train_s_predicted, "{:.1f}"),
        {}};
    if (!steps.empty()) {
      const double s = median(steps), tr = median(train_s);
      row[5] = report::number(s, "{:.0f}");
      row[7] = report::number(error_pct(first.steps_predicted, s), "{:+.1f}");
      row[8] = report::number(tr, "{:.1f}");
      row[10] = report::number(error_pct(first.train_s_predicted, tr), "{:+.1f}");
      step_errors.push_back(std::fabs(*row[7].value));
      time_errors.push_back(std::fabs(*row[10].value));
    }
    t.rows.push_back(std::move(row));
  }
  return t;
}

}  // namespace

void take_shaped_commbench(std::vector<std::string>& paths, SweepCheckInputs& in) {
  std::vector<std::string> rest;
  for (const std::string& path : paths) {
    const nlohmann::json record = read_json_file(path);
    const double mbit = shaped_hop_mbit(record);
    if (mbit <= 0) {
      rest.push_back(path);
      continue;
    }
    bool inter = false;
    std::string wire;
    const Link l = link_from_commbench(record, path, inter, wire);
    DLSCALE_CHECK(wire == "none",
                  "{}: a commbench across a shaped hop gives its rate in float32 (this one ran in "
                  "{}); time the 16-bit wires on unshaped links",
                  path, wire);
    in.shaped_bytes_per_s[mbit] = l.bytes_per_s;
  }
  paths = rest;
}

std::string strategy_of_record(const nlohmann::json& in) {
  const std::string kind = in.value(input::kStrategy, "allreduce");
  std::string s;
  if (kind == "independent") return "";
  if (kind == "ps") {
    s = fmt::format("ps:{}", in.value(input::kPsShards, 1));
    if (in.value(input::kPsPlacement, "colocated") == "dedicated") s += "+dedicated";
    if (in.value(input::kPsMode, "sync") == "async") s += "+async";
    if (in.value(input::kPsAssign, "round-robin") == "greedy") s += "+greedy";
    const double partition = in.value(input::kPsPartitionMb, 0.0);
    if (partition > 0) s += fmt::format("+partition:{:g}", partition);
  } else if (kind == "zero") {
    s = fmt::format("zero:{}", in.value(input::kZeroStage, 1));
  } else {
    s = kind;
  }
  if (kind != "zero" && in.value(input::kBucketMb, 25.0) == 0) s += "+flat";
  const std::string compress = in.value(input::kCompress, "none");
  if (compress != "none" && kind != "zero") s += "+" + compress;
  return s;
}

report::Report predict_report(const std::vector<sweep::RunRecord>& runs, const SweepCheckInputs& in) {
  std::vector<Checked> rows;
  for (const sweep::RunRecord& run : runs) {
    if (auto c = check_run(run, in)) rows.push_back(std::move(*c));
  }
  DLSCALE_CHECK(!rows.empty(), "no completed run of 2 or more workers with a stored train record in the selection");
  report::Report rep;
  rep.type = "predict";
  rep.title = "Predicted against measured";
  report::Table t;
  t.title = rep.title;
  t.headers = {"model", "link", "strategy", "workers", "measured/s", "predicted/s", "error %", "bottleneck"};
  t.numeric = {false, false, false, true, true, true, true, false};
  report::Table& d = rep.data;
  d.title = rep.title;
  d.headers = {"model", "link", "strategy", "workers", "measured_samples_per_sec", "predicted_samples_per_sec",
               "error_pct", "bottleneck"};
  d.numeric = t.numeric;
  std::vector<double> errors;
  for (const Checked& c : rows) {
    const double error = 100 * (c.predicted - c.measured) / c.measured;
    errors.push_back(std::fabs(error));
    t.rows.push_back({{c.model, {}},
                      {c.link, {}},
                      {c.strategy, {}},
                      {std::to_string(c.workers), static_cast<double>(c.workers)},
                      report::number(c.measured, "{:.1f}"),
                      report::number(c.predicted, "{:.1f}"),
                      report::number(error, "{:+.1f}"),
                      {c.bottleneck, {}}});
    d.rows.push_back(t.rows.back());
    d.rows.back()[4].value = c.measured;
    d.rows.back()[5].value = c.predicted;
    d.rows.back()[6].value = error;
  }
  rep.notes.push_back(error_summary(errors));
  rep.notes.push_back("measured: median samples/s of the completed repeats; predicted from the --calibrate records "
                      "and the network, each run's link, workers, strategy and threads taken from its record");
  add_busy_notes(rep, in);
  std::string hops;
  for (const auto& [mbit, rate] : in.shaped_bytes_per_s) {
    hops += fmt::format("{}{:g} Mbit/s delivers {:.2f} MB/s ({:.0f}%)", hops.empty() ? "" : ", ",
                        mbit, rate / 1e6, 100 * rate / (mbit * 1e6 / 8));
  }
  rep.notes.push_back(hops.empty() ? "shaped links and uplinks at their nominal rates"
                                   : "shaped hops as commbench measured them: " + hops +
                                         "; any other at its nominal rate");
  rep.tables.push_back(std::move(t));
  return rep;
}

report::Report predict_tta_report(const std::vector<sweep::RunRecord>& runs,
                                  const SweepCheckInputs& in, const TtaRun& tta,
                                  const nlohmann::json& tta_record) {
  std::vector<TtaChecked> rows;
  for (const sweep::RunRecord& run : runs) {
    if (auto c = check_tta_run(run, in, tta, tta_record)) rows.push_back(std::move(*c));
  }
  DLSCALE_CHECK(
      !rows.empty(),
      "no completed run in the selection trained {} to {} >= {:g} (the --tta record's model and "
      "target)",
      tta.model, tta.metric, tta.target);
  report::Report rep;
  rep.type = "predict";
  rep.title = fmt::format("Time to target: predicted against measured ({}, {} >= {:g})", tta.model,
                          tta.metric, tta.target);
  report::Table t;
  t.title = rep.title;
  t.headers = {"run",   "workers",         "strategy",   "link",        "global batch", "seed",
               "steps", "predicted steps", "training s", "predicted s", "error %"};
  t.numeric = {true, true, false, false, true, true, true, true, true, true, true};
  rep.data.title = rep.title;
  rep.data.headers = {
      "run",       "workers",    "strategy",         "link",           "global_batch",
      "seed",      "steps",      "steps_predicted",  "train_s",        "train_s_predicted",
      "error_pct", "tta_record", "time_to_target_s", "steps_error_pct"};
  rep.data.numeric = t.numeric;
  for (bool numeric : {false, true, true}) rep.data.numeric.push_back(numeric);
  std::vector<double> step_errors, time_errors;
  for (const TtaChecked& c : rows) {
    add_tta_row(rep, t, c);
    if (!c.reached || c.base) continue;
    step_errors.push_back(std::fabs(error_pct(c.steps_predicted, c.steps)));
    time_errors.push_back(std::fabs(error_pct(c.train_s_predicted, c.train_s)));
  }
  const BatchModel& m = tta.model_fit;
  rep.notes.push_back(
      fmt::format("from {}: {:.3g} epochs at global batch {:g}, {} {:.4g}, so S(B) = {:.4g} "
                  "(1 + {:.4g}/B) steps "
                  "(McCandlish et al. 2018, B_crit = {})",
                  tta.source, tta.epochs, tta.global_batch, tta.noise, m.b_noise, m.s_min,
                  m.b_noise, tta.noise));
  std::vector<double> group_steps, group_times;
  report::Table groups = tta_configurations(rows, group_steps, group_times);
  rep.notes.push_back("by configuration (median of its seeds), training time to target: " +
                      error_summary(group_times) + "; steps: " + error_summary(group_steps));
  rep.notes.push_back("by run, training time to target: " + error_summary(time_errors) +
                      "; steps: " + error_summary(step_errors));
  rep.notes.push_back(
      "measured training s: the run's time to target less its evaluations and checkpoints; "
      "predicted: the "
      "model's steps at the run's global batch x the scaling model's step for its workers, batch, "
      "strategy "
      "and link; (B0) marks the --tta record, which the model passes through (not in the errors)");
  const auto missed =
      std::count_if(rows.begin(), rows.end(), [](const TtaChecked& c) { return !c.reached; });
  if (missed > 0) rep.notes.push_back(fmt::format("{} run(s) did not reach the target", missed));
  add_busy_notes(rep, in);
  rep.tables.push_back(std::move(t));
  rep.tables.push_back(std::move(groups));
  return rep;
}

}  // namespace dlscale::predict
