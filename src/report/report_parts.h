#pragma once
// What the report types share (report/*_report.cpp): a run's repeats summed
// up as a Point, cells, label columns, and runs grouped for a side-by-side
// comparison. Internal to report/.
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/batch_model.h"
#include "report/report.h"

namespace dlscale::report {

using sweep::Params;
using sweep::RunRecord;

std::string text_of(const Params& p, const std::string& name);
/// Parameters (other than the axes and `exclude`) whose values differ among `runs`.
std::vector<std::string> varying(const std::vector<const RunRecord*>& runs, std::set<std::string> exclude);
/// The completed repeats of `run`: medians and ranges of samples/s and step time.
Point summarize_run(const RunRecord& run);
bool measured(const Point& p);
/// "123.4 ±2.1%": the repeats' median and half their range relative to it
/// (the spread only with two or more repeats).
Cell median_cell(double median_value, double lo, double hi, int repeats);
Cell throughput_cell(const Point& p);
Cell number(double v, const char* spec, const std::string& suffix = "");
std::vector<const RunRecord*> pointers(const std::vector<RunRecord>& runs);
std::string batch_header(const std::string& scaling);
void add_label_columns(Table& t, const std::vector<std::string>& names);
/// True when every value of `by` comes with one value of `param` among `runs`.
bool determined_by(const std::vector<const RunRecord*>& runs, const std::string& by, const std::string& param);
/// The median over completed repeats of `metric`, if any repeat has it.
std::optional<double> median_metric(const RunRecord& run, const std::string& metric);

/// A run of a per-run table (memory, noise): its labels and workers.
struct LabelledRun {
  const RunRecord* run = nullptr;
  std::vector<std::pair<std::string, std::string>> labels;  ///< model, strategy, varying params
  int workers = 1;
};
/// The runs that have `metric`, in order, labelled by model, strategy and
/// what else varies among them (but `besides` and a model's own settings,
/// such as its image size).
std::vector<LabelledRun> labelled_runs(const std::vector<RunRecord>& runs,
                                       const std::string& metric, std::set<std::string> besides);
/// A chart's line name for those labels: "resnet18 zero zero-stage=2".
std::string series_name(const std::vector<std::pair<std::string, std::string>>& labels);
/// Starts a per-run report's two tables: the displayed one (returned) and
/// rep.data, each titled rep.title, with a column per label (`labels`:
/// the first row's, then `more`) and a numeric one per figure (its
/// displayed header, its store metric for rep.data).
Table per_run_tables(Report& rep, const std::vector<std::pair<std::string, std::string>>& labels,
                     const std::vector<std::string>& more,
                     const std::vector<std::pair<std::string, std::string>>& figures);
/// A per-run row's first cells: its labels' values and its workers.
std::vector<Cell> label_cells(const std::vector<std::pair<std::string, std::string>>& labels,
                              int workers);

/// Runs grouped for a side-by-side comparison: one row per configuration
/// (everything but `by`), one entry per value of `by`.
struct Comparison {
  std::string by;
  std::string baseline;
  std::vector<std::string> values;  ///< the baseline first
  std::vector<std::string> labels;  ///< the row label columns
  std::vector<std::vector<std::string>> order;
  std::map<std::vector<std::string>, std::map<std::string, Point>> grouped;
};

/// Groups `runs` that set `by` by everything else; throws dlscale::Error
/// unless `by` takes two or more values and `wanted_baseline` ("" = the
/// first seen) is one of them.
Comparison compare_runs(const std::vector<RunRecord>& runs, const std::string& by,
                        const std::string& wanted_baseline);

/// One run's memory per worker (report --type memory and its HTML chart).
struct MemoryRow {
  std::vector<std::pair<std::string, std::string>> labels;  ///< model, strategy, varying params
  int workers = 1;
  std::vector<double> mib;  ///< by Figure; < 0 = unknown
  enum Figure { kParams, kGrads, kOptimizer, kTotal, kPeakRss, kDevicePeak };
};
/// The runs with memory figures, in order.
std::vector<MemoryRow> memory_rows(const std::vector<RunRecord>& runs);
/// Whether some row was measured on a GPU (has the CUDA allocator's peak).
bool any_device_peak(const std::vector<MemoryRow>& rows);

/// A run that measured the gradient noise scale (train --noise-scale).
struct NoiseRow {
  std::vector<std::pair<std::string, std::string>> labels;  ///< model, strategy, varying params
  int workers = 1;
  double global_batch = 0;
  std::vector<double> values;  ///< the table's columns after the batch; NaN = undefined
  double b_simple = 0;         ///< the B_simple of `values` (NaN = undefined)
  std::vector<std::pair<double, double>> course;  ///< (step, B_simple) of one repeat, thinned
};
/// The runs with a noise scale, in order.
std::vector<NoiseRow> noise_rows(const std::vector<RunRecord>& runs);

/// One global batch of a batch study (report --type batch): the runs that
/// trained to a target there, whatever their seed.
struct BatchPoint {
  double global_batch = 0;
  int runs = 0;                    ///< completed repeats that had a target
  int reached = 0;                 ///< of them, those that reached it
  std::optional<double> steps;     ///< median steps to target over those that reached it
  std::optional<double> epochs;    ///< median epochs to target
  std::optional<double> b_simple;  ///< median measured noise scale (over every run)
  std::optional<double> b_adam;    ///< median noise scale of Adam's preconditioned gradient
  /// At the final weights (train --noise-final), medians as above.
  std::optional<double> final_b_simple, final_b_adam;
  double samples_per_epoch = 0;    ///< steps x batch / epochs
};
/// The points of one configuration, ascending in global batch, with the
/// model fitted to them and the model through the smallest batch that
/// reached the target with a positive noise scale (B0).
struct BatchStudy {
  std::vector<std::pair<std::string, std::string>> labels;  ///< model, strategy, varying params
  std::vector<BatchPoint> points;
  BatchFit fit;
  std::optional<BatchModel> from_base;
  double base_batch = 0;         ///< B0, when from_base is set
  /// Which of B0's noise scales from_base takes: the final weights' where
  /// measured, else the training's; Adam's where measured, else B_simple.
  std::string base_noise;
  double samples_per_epoch = 0;  ///< the median over the points
};
/// The runs with a target, grouped by everything but the global batch, the
/// per-worker batch, --accumulate, the synthetic pool and the seed.
std::vector<BatchStudy> batch_studies(const std::vector<RunRecord>& runs);

// One function per report type.
Report scaling_report(const std::vector<RunRecord>& runs, const std::string& scaling);
Report breakdown_report(const std::vector<RunRecord>& runs);
Report compare_report(const std::vector<RunRecord>& runs, const ReportOptions& options);
Report io_report(const std::vector<RunRecord>& runs);
Report memory_report(const std::vector<RunRecord>& runs);
Report noise_report(const std::vector<RunRecord>& runs);
Report batch_report(const std::vector<RunRecord>& runs);

}  // namespace dlscale::report
