#pragma once
// Scaling reports from the results store (docs/reports.md): DLBS-style
// tables with one row per (model, batch, other varying parameters) and one
// column per worker count, a step-time breakdown, and side-by-side
// comparisons, the I/O overhead and time to accuracy. Built once as tables,
// then rendered in any format.
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "sweep/results_store.h"

namespace dlscale::report {

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
  std::string type = "weak";  ///< the report type's word (ReportKind::name)
  std::string title;
  std::vector<std::string> notes;
  std::vector<Table> tables;
  Table data;
};

struct ReportOptions {
  std::string type = "weak";  ///< a ReportKind's name
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

/// A report type: the word `report --type` takes, what its help says and
/// how it is built. report.cpp's table holds the shipped ones, in --type's
/// order; register_report_kind() adds one at run time.
struct ReportKind {
  std::string name;
  std::string help;  ///< a phrase for --type's help, e.g. "(busbw by message size, ...)"
  /// Builds the report; throws dlscale::Error naming what the runs lack.
  /// Empty for "predict", which `dlscale report` builds (it needs calibrations).
  std::function<Report(const std::vector<sweep::RunRecord>&, const ReportOptions&)> build;
  /// false: commbench runs (no throughput, no step time) are dropped before
  /// build, and a selection of only commbench runs is refused.
  bool reads_commbench = false;
};

/// The report types, in --type's order; a deque, so that a registration
/// keeps earlier entries where report_kind() pointed.
const std::deque<ReportKind>& report_kinds();
/// Their names, in --type's order.
std::vector<std::string> report_kind_names();
/// The kind named `name`; throws dlscale::Error listing the allowed names.
const ReportKind& report_kind(const std::string& name);
/// Adds a report type; throws when the name is empty or taken, or it has no build.
void register_report_kind(ReportKind kind);
/// `report --type`'s help: every kind's name and help, " | " between.
std::string report_type_help();
Format parse_format(const std::string& s);

}  // namespace dlscale::report
