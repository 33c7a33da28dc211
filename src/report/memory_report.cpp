#include <algorithm>
#include <iterator>

#include "core/error.h"
#include "core/record_keys.h"
#include "report/report_parts.h"

namespace dlscale::report {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

/// The memory figures of a record's results.mem, as the store keeps them.
struct MemoryMetric {
  const char* header;  ///< the wide table's column
  const char* metric;  ///< mem_<key> in the store
};
const MemoryMetric kMemory[] = {{"params MiB", "mem_params_bytes"},
                                {"grads MiB", "mem_grads_bytes"},
                                {"optimizer MiB", "mem_optimizer_bytes"},
                                {"total MiB", "mem_total_bytes"},
                                {"peak RSS MiB", "mem_peak_rss_bytes"},
                                {"GPU peak MiB", "mem_device_peak_bytes"}};

}  // namespace

std::vector<MemoryRow> memory_rows(const std::vector<RunRecord>& runs) {
  std::vector<MemoryRow> rows;
  for (LabelledRun& r : labelled_runs(runs, "mem_total_bytes", {})) {
    MemoryRow row;
    row.labels = std::move(r.labels);
    row.workers = r.workers;
    for (const MemoryMetric& m : kMemory) {
      row.mib.push_back(median_metric(*r.run, m.metric).value_or(-kMiB) / kMiB);
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

bool any_device_peak(const std::vector<MemoryRow>& rows) {
  return std::any_of(rows.begin(), rows.end(),
                     [](const MemoryRow& r) { return r.mib[MemoryRow::kDevicePeak] >= 0; });
}

/// What each worker keeps (docs/metrics.md, "Memory"): one row per run, the
/// most any rank keeps, as accounted, and the peak resident set.
Report memory_report(const std::vector<RunRecord>& runs) {
  const std::vector<MemoryRow> rows = memory_rows(runs);
  DLSCALE_CHECK(!rows.empty(),
                "no run in the selection has memory figures (train records have them since "
                "results.mem was added)");
  Report rep;
  rep.title =
      "Memory per worker (MiB: the most any rank keeps between steps, and its peak resident set)";
  rep.notes.push_back(
      "params, grads and optimizer are accounted from the tensors a rank keeps; peak RSS is "
      "the process's VmHWM (activations and LibTorch included)");
  // The GPU column only where some run was on a GPU (CPU reports keep theirs).
  const bool gpu = any_device_peak(rows);
  const size_t figures = gpu ? std::size(kMemory) : static_cast<size_t>(MemoryRow::kDevicePeak);
  if (gpu) {
    rep.notes.push_back(
        "GPU peak is the CUDA caching allocator's peak of bytes in tensors on the rank's GPU "
        "(torch.cuda.max_memory_allocated)");
  }
  rep.notes.push_back("values are medians of the completed repeats");
  std::vector<std::pair<std::string, std::string>> columns;
  for (size_t f = 0; f < figures; ++f) columns.emplace_back(kMemory[f].header, kMemory[f].metric);
  Table t = per_run_tables(rep, rows.front().labels, {"workers"}, columns);
  for (const MemoryRow& row : rows) {
    std::vector<Cell> cells = label_cells(row.labels, row.workers);
    std::vector<Cell> data_cells = cells;
    for (size_t f = 0; f < figures; ++f) {
      const double mib = row.mib[f];
      cells.push_back(mib < 0 ? Cell{"", {}} : number(mib, "{:.1f}"));
      data_cells.push_back(mib < 0 ? Cell{"", {}} : number(mib * kMiB, "{:.0f}"));
    }
    t.rows.push_back(std::move(cells));
    rep.data.rows.push_back(std::move(data_cells));
  }
  rep.tables.push_back(std::move(t));
  return rep;
}

}  // namespace dlscale::report
