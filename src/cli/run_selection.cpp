#include "cli/run_selection.h"

#include <iostream>

#include "core/files.h"
#include "report/results_view.h"

namespace dlscale::cli {

void add_run_selection(CLI::App* cmd, RunSelection& s) {
  cmd->add_option("--db", s.db, "Results store (SQLite file)")->capture_default_str();
  cmd->add_option("--sweep", s.sweep, "Only runs of this sweep (its name: the file's 'name:' or stem)");
  cmd->add_option("--where", s.where,
                  "Only runs for which this expression is true, e.g. \"${model} == 'lenet' and ${workers} > 1\" "
                  "(${status} and ${sweep} work too)");
}

std::vector<sweep::RunRecord> load_selected_runs(const RunSelection& s) {
  return report::load_runs(s.db, s.sweep, s.where);
}

void write_output(const std::string& text, const std::string& path) {
  if (path.empty()) {
    std::cout << text;
  } else {
    write_file_atomic(path, text);
  }
}

}  // namespace dlscale::cli
