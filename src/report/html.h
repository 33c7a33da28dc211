#pragma once
// The self-contained HTML report: inline CSS and SVG charts written by this
// code, no scripts and nothing fetched from the network.
#include <string>
#include <vector>

#include "sweep/results_store.h"

namespace dlscale::report {

struct HtmlOptions {
  std::string title = "dlscale scaling report";
  std::string source;       ///< shown under the title (the results store's path)
  std::string compare_by;   ///< as ReportOptions; "" = detect
  std::string baseline;
};

/// Throughput vs workers with the ideal-scaling line and efficiency vs
/// workers for each scaling mode present, the stacked step-time breakdown,
/// the comparison (when a parameter to compare by exists), the I/O overhead
/// (when runs differ in data, one synthetic), time to accuracy with top-1 vs
/// epoch and vs run time (when runs evaluated), every table, and each run's
/// full parameters. Throws dlscale::Error when `runs` is empty.
std::string render_html(const std::vector<sweep::RunRecord>& runs, const HtmlOptions& options);

}  // namespace dlscale::report
