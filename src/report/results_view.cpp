#include "report/results_view.h"

#include <filesystem>
#include <set>
#include <sstream>

#include "core/text.h"
#include "core/error.h"
#include "core/record_keys.h"
#include "core/stats.h"
#include "core/text_table.h"

namespace dlscale::report {
namespace {

std::string metric_text(double v) { return fmt::format("{:.6g}", v); }

}  // namespace

std::string list_runs(const std::vector<sweep::RunRecord>& runs) {
  TextTable t({"id", "sweep", "status", "kind", "model", "scaling", "workers", "batch", "global", "repeats",
               "samples/s", "started"},
              {Align::kRight, Align::kLeft, Align::kLeft, Align::kLeft, Align::kLeft, Align::kLeft, Align::kRight,
               Align::kRight, Align::kRight, Align::kRight, Align::kRight, Align::kLeft});
  for (const sweep::RunRecord& r : runs) {
    // Completed repeats, whatever they measure (a commbench run has no samples/s).
    int completed = 0;
    std::vector<double> rates;
    for (const auto& rep : r.repeats) {
      if (rep.status != sweep::kStatusCompleted) continue;
      ++completed;
      if (const auto it = rep.metrics.find(record::metric::kSamplesPerSec); it != rep.metrics.end()) {
        rates.push_back(it->second);
      }
    }
    auto p = [&](const char* name) { return sweep::param_text(r.params, name, "-"); };
    t.add_row({std::to_string(r.id), r.sweep, r.status, p("kind"), p("model"), p("scaling"), p("workers"), p("batch"),
               p("global-batch"), fmt::format("{}/{}", completed, p("repeats")),
               rates.empty() ? "-" : fmt::format("{:.1f}", median(rates)), r.started_at});
  }
  std::ostringstream out;
  t.print(out);
  out << runs.size() << " run(s)\n";
  return out.str();
}

std::string show_run(const sweep::RunRecord& r) {
  std::ostringstream out;
  out << fmt::format("run {} of sweep '{}': {}{}\n", r.id, r.sweep, r.status, r.reason.empty() ? "" : " (" + r.reason + ")");
  out << fmt::format("  started {}  ended {}  host {}  pid {}{}\n", r.started_at, r.ended_at.empty() ? "-" : r.ended_at,
                     r.host, r.pid, r.slurm_job.empty() ? "" : "  Slurm job " + r.slurm_job);
  out << "  versions " << dump_json(r.versions) << "\n  parameters:\n";
  for (const auto& [name, value] : r.params) out << fmt::format("    {}: {}\n", name, value.to_string());
  for (const auto& rep : r.repeats) {
    out << fmt::format("  repeat {}: {}{}  {:.1f} s  log {}\n", rep.repeat, rep.status,
                       rep.reason.empty() ? "" : " (" + rep.reason + ")", rep.wall_s, rep.log_path);
    for (const auto& [name, value] : rep.metrics) out << fmt::format("    {}: {}\n", name, metric_text(value));
  }
  return out.str();
}

std::string export_runs(const std::vector<sweep::RunRecord>& runs, Format format) {
  DLSCALE_CHECK(format == Format::kCsv || format == Format::kJson, "results export: --format must be csv or json");
  if (format == Format::kJson) {
    nlohmann::ordered_json all = nlohmann::ordered_json::array();
    for (const sweep::RunRecord& r : runs) {
      nlohmann::ordered_json j;
      j["id"] = r.id;
      j["sweep"] = r.sweep;
      j["status"] = r.status;
      j["reason"] = r.reason;
      j["started_at"] = r.started_at;
      j["ended_at"] = r.ended_at;
      j["host"] = r.host;
      if (!r.slurm_job.empty()) j["slurm_job"] = r.slurm_job;
      j["versions"] = r.versions;
      j["params"] = sweep::to_json(r.params);
      j["repeats"] = nlohmann::ordered_json::array();
      for (const auto& rep : r.repeats) {
        nlohmann::ordered_json x;
        x["repeat"] = rep.repeat;
        x["status"] = rep.status;
        x["reason"] = rep.reason;
        x["started_at"] = rep.started_at;
        x["ended_at"] = rep.ended_at;
        x["wall_s"] = rep.wall_s;
        x["log"] = rep.log_path;
        x["metrics"] = rep.metrics;
        j["repeats"].push_back(x);
      }
      all.push_back(j);
    }
    nlohmann::ordered_json doc;
    doc["schema"] = "dlscale.results-export/1";
    doc["runs"] = all;
    return dump_json(doc, 2) + "\n";
  }
  std::set<std::string> params, metrics;
  for (const auto& r : runs) {
    for (const auto& [n, v] : r.params) params.insert(n);
    for (const auto& rep : r.repeats) {
      for (const auto& [n, v] : rep.metrics) metrics.insert(n);
    }
  }
  std::ostringstream out;
  out << "run_id,sweep,run_status,run_reason";
  for (const auto& p : params) out << "," << csv_field(p);
  out << ",repeat,status,reason,started_at,ended_at,wall_s";
  for (const auto& m : metrics) out << "," << csv_field(m);
  out << "\n";
  for (const auto& r : runs) {
    auto prefix = [&] {
      out << r.id << "," << csv_field(r.sweep) << "," << r.status << "," << csv_field(r.reason);
      for (const auto& p : params) out << "," << csv_field(sweep::param_text(r.params, p, ""));
    };
    if (r.repeats.empty()) {
      prefix();
      out << ",,,,,,";
      for (std::size_t i = 0; i < metrics.size(); ++i) out << ",";
      out << "\n";
    }
    for (const auto& rep : r.repeats) {
      prefix();
      out << "," << rep.repeat << "," << rep.status << "," << csv_field(rep.reason) << "," << rep.started_at << ","
          << rep.ended_at << "," << metric_text(rep.wall_s);
      for (const auto& m : metrics) {
        const auto it = rep.metrics.find(m);
        out << "," << (it == rep.metrics.end() ? "" : metric_text(it->second));
      }
      out << "\n";
    }
  }
  return out.str();
}

}  // namespace dlscale::report

namespace dlscale::report {

std::vector<sweep::RunRecord> load_runs(const std::string& db, const std::string& sweep_name,
                                        const std::string& where) {
  DLSCALE_CHECK(std::filesystem::exists(db), "results store '{}' does not exist (run 'dlscale sweep FILE.yaml' first, "
                                             "or name the store with --db)",
                db);
  sweep::ResultsStore store(db);
  return filter_runs(store.runs(sweep_name), where);
}

}  // namespace dlscale::report
