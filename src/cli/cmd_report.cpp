// dlscale report: scaling tables and the HTML page from the results store.
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/run_selection.h"
#include "core/error.h"
#include "core/files.h"
#include "predict/predict_report.h"
#include "predict/system_file.h"
#include "predict/workload.h"
#include "report/html.h"
#include "report/results_view.h"

namespace dlscale::cli {
namespace {

struct ReportFlags {
  RunSelection selection;
  std::string type = "weak";
  std::string format = "text";
  std::string compare_by;
  std::string baseline;
  std::string html;
  std::string output;
  std::vector<std::string> calibrate;  // --type predict
  std::vector<std::string> calibrate_busy;
  std::string tta;  // --type predict: a record or run id that reached its target
  std::string system;
  predict::NetworkFlags network;
};

/// --tta's record: a file's, else (digits naming no file) the stored run's
/// first completed repeat in --db.
nlohmann::json tta_record(const ReportFlags& f) {
  const bool id = !f.tta.empty() && f.tta.find_first_not_of("0123456789") == std::string::npos;
  if (!id || std::filesystem::exists(f.tta)) return predict::read_json_file(f.tta);
  const auto runs = report::load_runs(f.selection.db, "", "");
  const auto run = std::find_if(runs.begin(), runs.end(), [&](const sweep::RunRecord& r) {
    return std::to_string(r.id) == f.tta;
  });
  DLSCALE_CHECK(run != runs.end(), "--tta {}: no such file, and no run {} in {}", f.tta, f.tta,
                f.selection.db);
  nlohmann::json record = predict::stored_train_record(*run);
  DLSCALE_CHECK(!record.is_null(),
                "--tta {}: run {} of {} has no completed repeat with a train record", f.tta, f.tta,
                f.selection.db);
  return record;
}

/// --type predict: each run against the scaling model.
report::Report predict_report(const ReportFlags& f, const std::vector<sweep::RunRecord>& runs) {
  DLSCALE_CHECK(!f.calibrate.empty(), "--type predict needs --calibrate RECORD for each model (a 1-worker 'dlscale "
                "train --trace T --json FILE' run)");
  std::unique_ptr<predict::SystemSpec> system;
  if (!f.system.empty()) {
    system = std::make_unique<predict::SystemSpec>(predict::load_system(f.system, DLSCALE_SYSTEMS_DIR));
  }
  predict::SweepCheckInputs in;
  for (const std::string& path : f.calibrate) {
    in.calibrations.push_back(predict::calibrate_from_record(predict::read_json_file(path), path));
  }
  for (const std::string& path : f.calibrate_busy) {
    in.busy_calibrations.push_back(
        predict::calibrate_busy_from_record(predict::read_json_file(path), path));
  }
  predict::NetworkFlags network = f.network;
  predict::take_shaped_commbench(network.commbench, in);  // a shaped link's or uplink's own rate
  in.base = predict::resolve_network(network, system.get());
  if (system != nullptr) in.shared_cores = system->shared_cores;
  if (system != nullptr) in.copy_bytes_per_s = system->copy_bytes_per_s;
  // A commbench of the unshaped link measured that rate on this machine,
  // and a float16 or bfloat16 one that wire type's.
  if (!network.commbench.empty()) {
    in.copy_bytes_per_s = in.base.inter.bytes_per_s;
    for (size_t i = 0; i < in.base.wire16.size(); ++i) {
      in.wire16_copy_bytes_per_s[i] = in.base.wire16[i].inter_bytes_per_s;
    }
  }
  if (f.tta.empty()) return predict::predict_report(runs, in);
  const nlohmann::json record = tta_record(f);
  const std::string what = "--tta " + f.tta;
  return predict::predict_tta_report(runs, in, predict::tta_run_from_record(record, what), record);
}

void run(const ReportFlags& f, bool type_given) {
  check_output_paths({{"--html", f.html}, {"-o", f.output}},
                     {{"--db", f.selection.db, ""}});
  const auto runs = load_selected_runs(f.selection);
  const report::ReportOptions o{f.type, f.compare_by, f.baseline};  // --type: a kind (IsMember)
  const report::Format format = report::parse_format(f.format);
  if (!f.html.empty()) {
    report::HtmlOptions h;
    h.title = f.selection.sweep.empty() ? "dlscale scaling report" : "dlscale report: " + f.selection.sweep;
    h.source = f.selection.db;
    h.compare_by = f.compare_by;
    h.baseline = f.baseline;
    write_file_atomic(f.html, report::render_html(runs, h));
    std::cerr << "HTML report: " << f.html << "\n";
    if (!type_given) return;
  }
  DLSCALE_CHECK(f.tta.empty() || o.type == "predict",
                "--tta goes with --type predict (the type is {})", o.type);
  DLSCALE_CHECK(f.calibrate_busy.empty() || o.type == "predict",
                "--calibrate-busy goes with --type predict (the type is {})", o.type);
  if (o.type == "predict") {
    write_output(report::render(predict_report(f, runs), format), f.output);
    return;
  }
  write_output(report::render(report::build_report(runs, o), format), f.output);
}

}  // namespace

void add_report_command(CLI::App& app) {
  auto f = std::make_shared<ReportFlags>();
  CLI::App* cmd = app.add_subcommand(
      "report",
      "Scaling tables from the results store: step time, throughput, speedup and efficiency per "
      "worker count (weak, strong), the step-time breakdown, a side-by-side comparison, the I/O "
      "overhead, the time to accuracy, the memory per worker, the gradient noise scale or steps to "
      "target against the batch; and a "
      "self-contained HTML page with charts (docs/reports.md).");
  add_run_selection(cmd, f->selection);
  CLI::Option* type = cmd->add_option("--type", f->type, report::report_type_help())
                          ->check(CLI::IsMember(report::report_kind_names()))
                          ->capture_default_str();
  cmd->add_option("--format", f->format, "text | markdown | csv | json")
      ->check(CLI::IsMember({"text", "markdown", "csv", "json"}))
      ->capture_default_str();
  cmd->add_option("--compare-by", f->compare_by,
                  "compare: the parameter whose values go side by side (default: the first of kind, backend, "
                  "strategy, launcher or a _name parameter that varies)");
  cmd->add_option("--baseline", f->baseline,
                  "compare: the value the others are divided by (default: the first one run)");
  cmd->add_option("--html", f->html,
                  "Write the HTML report (charts, every table, each run's parameters) here; with no --type, only "
                  "that");
  cmd->add_option("--calibrate", f->calibrate,
                  "predict: a 1-worker 'dlscale train --trace T --json FILE' record per model (repeatable)")
      ->group("Predict");
  cmd->add_option(
         "--calibrate-busy", f->calibrate_busy,
         "predict: per model, a 'dlscale train --workers C --strategy independent --trace T --json "
         "FILE' record, C the machine's cores: what a worker computes while every core computes; "
         "runs of 2 or more workers are predicted at its times (repeatable; docs/predict.md)")
      ->group("Predict");
  cmd->add_option("--tta", f->tta,
                  "predict: time to target instead of samples/s: a train record (or a run id in "
                  "--db) that reached "
                  "its target and measured its noise scale; each run of its model and target gets "
                  "its measured "
                  "steps and training time beside the predicted")
      ->group("Predict");
  cmd->add_option("--system", f->system, "predict: a system file or shipped name for the links runs do not shape")
      ->group("Predict");
  cmd->add_option(
         "--commbench", f->network.commbench,
         "predict: a 'dlscale commbench --json' record (repeatable): the unshaped link it measured "
         "and the cores' copy rate; a --dtype f16 or bf16 record gives that wire type's; one "
         "across a cluster's shaped link or uplink gives what a hop of that rate delivers")
      ->group("Predict");
  cmd->add_option("--link-gbps", f->network.link_gbps, "predict: Gbit/s of links runs do not shape")->group("Predict");
  cmd->add_option("--latency-us", f->network.latency_us, "predict: latency of one message, microseconds")
      ->group("Predict");
  cmd->add_option("--output,-o", f->output, "Write the table here (atomically) instead of standard output");
  cmd->callback([f, type] { run(*f, type->count() > 0); });
}

}  // namespace dlscale::cli
