// dlscale results list|show|export: what the results store holds.
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/run_selection.h"
#include "core/error.h"
#include "core/files.h"
#include "report/results_view.h"

namespace dlscale::cli {
namespace {

struct ResultsFlags {
  RunSelection selection;
  std::int64_t id = 0;
  std::string format = "csv";
  std::string output;
};

}  // namespace

void add_results_command(CLI::App& app) {
  auto f = std::make_shared<ResultsFlags>();
  CLI::App* cmd = app.add_subcommand("results", "List, show or export the runs in the results store");
  cmd->require_subcommand(1);
  CLI::App* list = cmd->add_subcommand("list", "One line per run: status, main parameters, median samples/s");
  add_run_selection(list, f->selection);
  list->callback([f] { std::cout << report::list_runs(load_selected_runs(f->selection)); });

  CLI::App* show = cmd->add_subcommand("show", "Everything stored about one run, repeats and metrics included");
  show->add_option("id", f->id, "Run id (see 'dlscale results list')")->required();
  show->add_option("--db", f->selection.db, "Results store (SQLite file)")->capture_default_str();
  show->callback([f] {
    for (const sweep::RunRecord& r : report::load_runs(f->selection.db, "", "")) {
      if (r.id == f->id) {
        std::cout << report::show_run(r);
        return;
      }
    }
    throw Error(fmt::format("no run with id {} in '{}' (see 'dlscale results list')", f->id, f->selection.db));
  });

  CLI::App* exp = cmd->add_subcommand(
      "export", "Export runs for other tools: CSV with one row per repeat (parameters and metrics as columns), or "
                "JSON");
  add_run_selection(exp, f->selection);
  exp->add_option("--format", f->format, "csv | json")
      ->check(CLI::IsMember({"csv", "json"}))
      ->capture_default_str();
  exp->add_option("--output,-o", f->output, "Write here (atomically) instead of standard output");
  exp->callback([f] {
    check_output_paths({{"-o", f->output}}, {{"--db", f->selection.db, ""}});
    write_output(report::export_runs(load_selected_runs(f->selection), report::parse_format(f->format)), f->output);
  });
}

}  // namespace dlscale::cli
