#include "report/report_parts.h"

#include <optional>

#include "core/error.h"
#include "core/record_keys.h"
#include "core/stats.h"

namespace dlscale::report {

namespace {

const std::vector<std::string> kPhases = {"data", "forward", "backward", "comm", "optimizer"};

/// Why a model scales as it does: the gradient bytes a worker exchanges per
/// sample of its batch against the training FLOPs it computes per sample
/// (3 x forward, docs/metrics.md). None when no run exchanged gradients.
std::optional<Table> exchange_against_compute(const std::vector<const RunRecord*>& runs,
                                              const std::vector<std::string>& labels) {
  Table t;
  t.title = "Exchanged against computed, per sample of a worker's batch";
  add_label_columns(t, labels);
  for (const char* h : {"gradient KB/sample", "GFLOP/sample", "bytes per MFLOP"}) {
    t.headers.push_back(h);
    t.numeric.push_back(true);
  }
  for (const RunRecord* r : runs) {
    const auto bytes = median_metric(*r, "comm_bytes_per_step");
    const auto gflops = median_metric(*r, record::kEstTrainGflopsPerSec);
    const auto rate = median_metric(*r, record::metric::kSamplesPerSec);
    if (!bytes || !gflops || !rate || *rate <= 0 || !r->params.count("batch")) continue;
    const double batch = static_cast<double>(sweep::param_int(r->params, "batch"));
    const double per_sample = *bytes / batch, flop = *gflops / *rate * 1e9;
    std::vector<Cell> cells;
    for (const std::string& l : labels) cells.push_back({text_of(r->params, l == "batch/worker" ? "batch" : l), {}});
    cells.push_back(number(per_sample / 1e3, "{:.2f}"));
    cells.push_back(number(flop / 1e9, "{:.4g}"));
    cells.push_back(number(flop > 0 ? per_sample / (flop / 1e6) : 0.0, "{:.4g}"));
    t.rows.push_back(std::move(cells));
  }
  if (t.rows.empty()) return std::nullopt;
  return t;
}

}  // namespace

Report breakdown_report(const std::vector<RunRecord>& runs) {
  Report rep;
  rep.title = "Step-time breakdown (median ms per step, share of the step)";
  rep.notes.push_back("comm is the communication not hidden behind the backward pass (max over ranks)");
  std::vector<const RunRecord*> with;
  for (const RunRecord& r : runs) {
    for (const sweep::RepeatRecord& rep_rec : r.repeats) {
      if (rep_rec.metrics.count(record::metric::kBreakdownTotalMs)) {
        with.push_back(&r);
        break;
      }
    }
  }
  DLSCALE_CHECK(!with.empty(), "no run in the selection has a step-time breakdown (only dlscale runs record one)");
  std::vector<std::string> labels = {"model", "scaling", "workers", "batch/worker"};
  const std::vector<std::string> extra = varying(with, {});
  labels.insert(labels.end(), extra.begin(), extra.end());
  Table t;
  t.title = rep.title;
  add_label_columns(t, labels);
  for (const std::string& ph : kPhases) {
    t.headers.push_back(ph);
    t.numeric.push_back(true);
  }
  t.headers.push_back("total");
  t.numeric.push_back(true);
  Table& d = rep.data;
  d.title = rep.title;
  add_label_columns(d, labels);
  for (const std::string& ph : kPhases) {
    d.headers.push_back(ph + "_ms");
    d.numeric.push_back(true);
    d.headers.push_back(ph + "_pct");
    d.numeric.push_back(true);
  }
  d.headers.push_back("total_ms");
  d.numeric.push_back(true);
  for (const RunRecord* r : with) {
    std::map<std::string, std::vector<double>> values;
    for (const sweep::RepeatRecord& rr : r->repeats) {
      if (rr.status != sweep::kStatusCompleted) continue;
      for (const auto& [name, v] : rr.metrics) values[name].push_back(v);
    }
    std::vector<Cell> cells, data_cells;
    for (const std::string& l : labels) {
      const std::string name = l == "batch/worker" ? "batch" : l;
      cells.push_back({text_of(r->params, name), {}});
    }
    data_cells = cells;
    const double total = median(values[record::metric::kBreakdownTotalMs]);
    for (const std::string& ph : kPhases) {
      const double ms = median(values[record::metric::breakdown_ms(ph)]);
      const double pct = total > 0 ? 100.0 * ms / total : 0;
      cells.push_back({fmt::format("{:.2f} ({:.0f}%)", ms, pct), ms});
      data_cells.push_back(number(ms, "{:.6g}"));
      data_cells.push_back(number(pct, "{:.4g}"));
    }
    cells.push_back(number(total, "{:.2f}"));
    data_cells.push_back(number(total, "{:.6g}"));
    t.rows.push_back(std::move(cells));
    d.rows.push_back(std::move(data_cells));
  }
  rep.tables.push_back(std::move(t));
  if (auto ratio = exchange_against_compute(with, labels)) rep.tables.push_back(std::move(*ratio));
  return rep;
}

}  // namespace dlscale::report
