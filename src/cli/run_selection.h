#pragma once
// What the `results` and `report` commands share: the flags that choose the
// runs (--db, --sweep, --where) and where their text goes.
#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "sweep/results_store.h"

namespace dlscale::cli {

struct RunSelection {
  std::string db = "dlscale-results.db";
  std::string sweep;
  std::string where;
};

/// Registers --db, --sweep and --where on `cmd`, filling `selection`.
void add_run_selection(CLI::App* cmd, RunSelection& selection);
/// The selected runs (report::load_runs).
std::vector<sweep::RunRecord> load_selected_runs(const RunSelection& selection);
/// Writes `text` to standard output, or atomically to `path` when it is set.
void write_output(const std::string& text, const std::string& path);

}  // namespace dlscale::cli
