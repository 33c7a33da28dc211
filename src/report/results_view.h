#pragma once
// `dlscale results`: the store's runs as a list, one run in full, or an
// export for other tools (docs/results.md).
#include <string>
#include <vector>

#include "report/report.h"
#include "sweep/results_store.h"

namespace dlscale::report {

/// One line per run: id, sweep, status, the main parameters, median samples/s.
std::string list_runs(const std::vector<sweep::RunRecord>& runs);
/// Everything stored about one run: parameters, status and reason, each
/// repeat with its metrics and log.
std::string show_run(const sweep::RunRecord& run);
/// CSV: one row per repeat with every parameter and metric as a column;
/// JSON: the runs with their parameters, repeats and metrics.
std::string export_runs(const std::vector<sweep::RunRecord>& runs, Format format);

}  // namespace dlscale::report

namespace dlscale::report {

/// The selection every `results` and `report` command works on: the runs of
/// the store at `db` (which must exist), of one sweep when `sweep` is set,
/// for which the `where` expression is true when set.
std::vector<sweep::RunRecord> load_runs(const std::string& db, const std::string& sweep, const std::string& where);

}  // namespace dlscale::report
