#pragma once
// Scaling reports from the results store (docs/reports.md): DLBS-style
// tables with one row per (model, batch, other varying parameters) and one
// column per worker count, a step-time breakdown, and side-by-side
// comparisons, the I/O overhead and time to accuracy. Built once as tables,
// then rendered in any format.
#include <optional>
#include <string>
#include <vector>

#include "sweep/results_store.h"

namespace dlscale::report {

/// kPredict is built by predict/predict_report.h (it needs calibrations).
enum class ReportType {
  kWeak,
  kStrong,
  kBreakdown,
  kCompare,
  kCommbench,
  kIo,
  kTta,
  kMemory,
  kNoise,
  kBatch,
  kPredict
};
enum class Format { kText, kMarkdown, kCsv, kJson };

/// A cell: its display text and, for numbers, the value CSV/JSON carry.
struct Cell {
  std::string text;
  std::optional<double> value;
};

struct Table {
  std::string title;
  std::vector<std::string> headers;
  std::vector<bool> numeric;  ///< per column: right-aligned, a number in CSV/JSON
  std::vector<std::vector<Cell>> rows;
};

/// One report: wide tables for people (terminal, Markdown, HTML) and one
/// long table with a row per measured point for programs (CSV, JSON).
struct Report {
  ReportType type = ReportType::kWeak;
  std::string title;
  std::vector<std::string> notes;
  std::vector<Table> tables;
  Table data;
};

struct ReportOptions {
  ReportType type = ReportType::kWeak;
  std::string compare_by;  ///< compare: the parameter whose values go side by side ("" = detect)
  std::string baseline;    ///< compare: the value others are divided by ("" = the first seen)
};

/// A measured configuration: the completed repeats of one run summarized.
struct Point {
  const sweep::RunRecord* run = nullptr;
  std::string status;  ///< completed, or why there is no number
  int repeats = 0;     ///< completed repeats
  double samples_per_sec = 0, samples_per_sec_min = 0, samples_per_sec_max = 0;
  /// The model's throughput unit (its record's model.unit: "tokens" for the
  /// sequence models) and how many a sample holds; "" when the record does
  /// not say (runs stored before items_per_sec, other tools' runs).
  std::string unit;
  double items_per_sample = 0;
  double step_time_ms = 0, step_time_min_ms = 0, step_time_max_ms = 0;
  double speedup = 0, efficiency_pct = 0;  ///< against the row's fewest workers
  bool has_speedup = false;
  int base_workers = 0;
};

/// One row of a scaling table: the runs that differ only in worker count.
struct ScalingRow {
  std::vector<std::pair<std::string, std::string>> labels;  ///< (model, batch, varying params)
  std::vector<std::pair<int, Point>> points;                 ///< by worker count, ascending
};

/// Runs of one scaling mode ("weak"/"strong") grouped into rows, with
/// speedup and efficiency (weak: t1/tN; strong: t1/(N·tN)).
std::vector<ScalingRow> scaling_rows(const std::vector<sweep::RunRecord>& runs, const std::string& scaling);

/// The parameter a compare report goes by when none is given: the first of
/// kind, backend, strategy, launcher or a parameter starting with '_' that
/// takes two or more values. "" when there is none.
std::string detect_compare_by(const std::vector<sweep::RunRecord>& runs);

/// Builds a report; throws dlscale::Error when the runs hold nothing for it
/// (naming what is missing).
Report build_report(const std::vector<sweep::RunRecord>& runs, const ReportOptions& options);

/// A CSV field, quoted when it holds a comma, quote or newline (RFC 4180).
std::string csv_field(const std::string& s);

/// Renders for a terminal (aligned columns), Markdown, CSV or JSON.
std::string render(const Report& report, Format format);

/// Keeps the runs for which `where` (an expression over ${param}) is true.
std::vector<sweep::RunRecord> filter_runs(std::vector<sweep::RunRecord> runs, const std::string& where);

ReportType parse_report_type(const std::string& s);
/// The word `report --type` takes for `type` (the same table parses it).
std::string to_string(ReportType type);
Format parse_format(const std::string& s);

}  // namespace dlscale::report
