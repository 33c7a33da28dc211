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
namespace {

namespace input = record::input;

/// The first completed repeat's record, or null.
nlohmann::json run_record(const sweep::RunRecord& run) {
  for (const sweep::RepeatRecord& r : run.repeats) {
    if (r.status != sweep::kStatusCompleted || r.record.empty()) continue;
    nlohmann::json j = nlohmann::json::parse(r.record, nullptr, false);
    if (j.is_object() && j.value(record::kKind, "") == record::kKindTrain &&
        j.contains(record::kInputs))
      return j;
  }
  return nullptr;
}

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
    if (mbit > 0) n.inter.bytes_per_s = shaped_rate(in, mbit);
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

std::optional<Checked> check_run(const sweep::RunRecord& run, const SweepCheckInputs& in) {
  const nlohmann::json record = run_record(run);
  const auto measured = report::median_metric(run, record::metric::kSamplesPerSec);
  if (record.is_null() || !measured) return std::nullopt;
  const nlohmann::json& inputs = record[record::kInputs];
  Checked c;
  c.workers = inputs.value(input::kWorldSize, 1);
  c.model = inputs.value(input::kModel, "");
  c.strategy = strategy_of_record(inputs);
  // The predictor models one forward and backward per step: runs with
  // --accumulate are not put beside its predictions.
  if (c.workers < 2 || c.strategy.empty() || inputs.value(input::kAccumulate, int64_t{1}) != 1) {
    return std::nullopt;
  }
  const auto cal = std::find_if(in.calibrations.begin(), in.calibrations.end(),
                                [&](const Workload& w) { return w.model == c.model; });
  DLSCALE_CHECK(cal != in.calibrations.end(), "run {} trained {}, but no --calibrate record measured it", run.id,
                c.model);
  const Network n = run_network(inputs, in, c.link);
  PredictOptions o;
  o.workers = {c.workers};
  o.batch = inputs.value(input::kBatch, 0);
  o.bucket_mb = inputs.value(input::kBucketMb, 25.0);
  o.first_bucket_mb = inputs.value(input::kFirstBucketMb, 1.0);
  o.threads_per_worker = inputs.value(input::kThreads, 1);
  const nlohmann::json& env =
      record.contains(record::kEnvironment) ? record[record::kEnvironment] : nlohmann::json();
  o.shared_cores = in.shared_cores > 0 ? in.shared_cores
                   : env.is_object()   ? env.value(record::kOnlineCores, 0)
                                       : 0;
  o.copy_bytes_per_s = in.copy_bytes_per_s;
  o.wire16_copy_bytes_per_s = in.wire16_copy_bytes_per_s;
  const Prediction p = predict(*cal, n, {parse_strategy(c.strategy)}, o);
  c.measured = *measured;
  c.predicted = p.strategies[0].points[0].throughput;
  c.bottleneck = p.strategies[0].points[0].bottleneck;
  return c;
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
  const auto within = std::count_if(errors.begin(), errors.end(), [](double e) { return e <= 25; });
  rep.notes.push_back(fmt::format("median |error| {:.1f}%, largest {:.1f}%; {} of {} within 25%", median(errors),
                                  *std::max_element(errors.begin(), errors.end()), within, errors.size()));
  rep.notes.push_back("measured: median samples/s of the completed repeats; predicted from the --calibrate records "
                      "and the network, each run's link, workers, strategy and threads taken from its record");
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

}  // namespace dlscale::predict
