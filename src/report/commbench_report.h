#pragma once
// Reports of `kind: commbench` sweep runs: busbw per message size for each
// operation and configuration, and the alpha-beta fits (docs/reports.md).
#include <string>
#include <utility>
#include <vector>

#include "report/report.h"
#include "sweep/results_store.h"

namespace dlscale::report {

/// True for a run of kind commbench (scaling reports leave these out).
bool is_commbench_run(const sweep::RunRecord& run);

/// One line of busbw against message size: an operation under one
/// configuration (the parameters that vary between the commbench runs).
struct BusbwSeries {
  std::string op;
  std::string name;                               ///< "allreduce workers=2 backend=gloo"
  std::vector<std::pair<double, double>> points;  ///< (bytes, median busbw GB/s over repeats)
};

/// The series of every commbench run in `runs`, in run order.
std::vector<BusbwSeries> busbw_series(const std::vector<sweep::RunRecord>& runs);

/// Tables: busbw by size (a row per series, a column per size) and the fits
/// (alpha, B per series); data: one row per (series, size). Throws
/// dlscale::Error when `runs` holds no completed commbench run.
Report commbench_report(const std::vector<sweep::RunRecord>& runs);

}  // namespace dlscale::report
