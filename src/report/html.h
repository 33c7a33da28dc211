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
/// (when runs differ in data, one synthetic), time to accuracy with accuracy (top-1, token accuracy, HR@10) vs
/// epoch and vs run time (when runs evaluated), every table, and each run's
/// full parameters. Throws dlscale::Error when `runs` is empty.
std::string render_html(const std::vector<sweep::RunRecord>& runs, const HtmlOptions& options);

/// One line of a chart on a page of render_chart_page.
struct ChartLine {
  std::string name;
  std::vector<std::pair<double, double>> points;  ///< (x: one of the chart's xs, y)
  bool dashed = false;                            ///< drawn thin and dashed, no legend entry
};
struct ChartSpec {
  std::string title;
  std::string y_label;
  std::vector<double> xs;  ///< the categories of the x axis (worker counts), evenly spaced
  std::vector<ChartLine> lines;
  double y_min_top = 0;    ///< the y axis reaches at least this
};
/// A self-contained page (the report's style, no scripts): a title, notes
/// under it, the charts side by side, then `body_html` (already escaped).
std::string render_chart_page(const std::string& title, const std::vector<std::string>& notes,
                              const std::vector<ChartSpec>& charts, const std::string& body_html);
/// `s` with HTML's special characters escaped.
std::string html_escape(const std::string& s);

}  // namespace dlscale::report
