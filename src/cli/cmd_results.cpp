// dlscale results list|show|export: what the results store holds.
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "core/error.h"
#include "core/files.h"
#include "report/results_view.h"

namespace dlscale::cli {
namespace {

struct ResultsFlags {
  std::string db = "dlscale-results.db";
  std::string sweep;
  std::string where;
  std::int64_t id = 0;
  std::string format = "csv";
  std::string output;
};

void add_selection(CLI::App* cmd, ResultsFlags& f) {
  cmd->add_option("--db", f.db, "Results store (SQLite file)")->capture_default_str();
  cmd->add_option("--sweep", f.sweep, "Only runs of this sweep (its name: the file's 'name:' or stem)");
  cmd->add_option("--where", f.where,
                  "Only runs for which this expression is true, e.g. \"${model} == 'lenet' and ${workers} > 1\" "
                  "(${status} and ${sweep} work too)");
}

void emit(const std::string& text, const std::string& output) {
  if (output.empty()) {
    std::cout << text;
  } else {
    write_file_atomic(output, text);
  }
}

}  // namespace

void add_results_command(CLI::App& app) {
  auto f = std::make_shared<ResultsFlags>();
  CLI::App* cmd = app.add_subcommand("results", "List, show or export the runs in the results store");
  cmd->require_subcommand(1);
  CLI::App* list = cmd->add_subcommand("list", "One line per run: status, main parameters, median samples/s");
  add_selection(list, *f);
  list->callback([f] { std::cout << report::list_runs(report::load_runs(f->db, f->sweep, f->where)); });

  CLI::App* show = cmd->add_subcommand("show", "Everything stored about one run, repeats and metrics included");
  show->add_option("id", f->id, "Run id (see 'dlscale results list')")->required();
  show->add_option("--db", f->db, "Results store (SQLite file)")->capture_default_str();
  show->callback([f] {
    for (const sweep::RunRecord& r : report::load_runs(f->db, "", "")) {
      if (r.id == f->id) {
        std::cout << report::show_run(r);
        return;
      }
    }
    throw Error(fmt::format("no run with id {} in '{}' (see 'dlscale results list')", f->id, f->db));
  });

  CLI::App* exp = cmd->add_subcommand(
      "export", "Export runs for other tools: CSV with one row per repeat (parameters and metrics as columns), or "
                "JSON");
  add_selection(exp, *f);
  exp->add_option("--format", f->format, "csv | json")
      ->check(CLI::IsMember({"csv", "json"}))
      ->capture_default_str();
  exp->add_option("--output,-o", f->output, "Write here (atomically) instead of standard output");
  exp->callback([f] {
    if (!f->output.empty()) check_output_path(f->output);
    emit(report::export_runs(report::load_runs(f->db, f->sweep, f->where), report::parse_format(f->format)),
         f->output);
  });
}

}  // namespace dlscale::cli
