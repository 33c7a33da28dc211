#include "report/report.h"

#include "core/enum_names.h"
#include "core/error.h"
#include "core/text.h"
#include "report/commbench_report.h"
#include "report/report_parts.h"
#include "report/tta_report.h"

namespace dlscale::report {
namespace {

std::deque<ReportKind> make_kinds() {
  using Runs = std::vector<RunRecord>;
  const auto plain = [](Report (*f)(const Runs&)) {
    return [f](const Runs& runs, const ReportOptions&) { return f(runs); };
  };
  std::deque<ReportKind> kinds{
      {"weak", "",
       [](const Runs& runs, const ReportOptions&) { return scaling_report(runs, "weak"); }},
      {"strong", "",
       [](const Runs& runs, const ReportOptions&) { return scaling_report(runs, "strong"); }},
      {"breakdown", "", plain(breakdown_report)},
      {"compare", "", compare_report},
      {"commbench", "(busbw by message size of kind: commbench runs)", plain(commbench_report),
       true},
      {"io", "(I/O overhead of each data source against data: synthetic, docs/data.md)",
       plain(io_report)},
      {"tta",
       "(time to accuracy against workers: MLPerf's olympic mean over seeds and repeats, "
       "docs/convergence.md)",
       plain(tta_report)},
      {"memory",
       "(parameters, gradients and optimizer state each worker keeps, and its peak resident set, "
       "docs/metrics.md)",
       plain(memory_report)},
      {"noise",
       "(the gradient noise scale of the runs that measured it: several averaging workers unasked, "
       "or train --noise-scale; docs/convergence.md)",
       plain(noise_report)},
      {"batch",
       "(steps and epochs to target against the global batch, with McCandlish et al.'s model "
       "fitted, "
       "examples/batch-scaling.yaml)",
       plain(batch_report)},
      {"predict",
       "(each run's samples/s against the scaling model's; needs --calibrate, docs/predict.md)",
       nullptr}};
  return kinds;
}

std::deque<ReportKind>& kind_table() {
  static std::deque<ReportKind> kinds = make_kinds();
  return kinds;
}

constexpr EnumNames<Format, 4> kFormatNames{
    "format", {{{Format::kText, "text"}, {Format::kMarkdown, "markdown"}, {Format::kCsv, "csv"}, {Format::kJson, "json"}}}};

}  // namespace

Report build_report(const std::vector<RunRecord>& all, const ReportOptions& o) {
  const ReportKind& kind = report_kind(o.type);
  DLSCALE_CHECK(kind.build != nullptr,
                "--type {} is built by 'dlscale report' (it needs --calibrate)", kind.name);
  DLSCALE_CHECK(!all.empty(), "no runs in the selection");
  std::vector<RunRecord> runs;
  // Collective benchmarks have no throughput or step time: not scaling data.
  for (const RunRecord& r : all) {
    if (kind.reads_commbench || !is_commbench_run(r)) runs.push_back(r);
  }
  DLSCALE_CHECK(!runs.empty(), "the selection holds only commbench runs; use --type commbench");
  Report rep = kind.build(runs, o);
  rep.type = kind.name;
  return rep;
}

std::vector<RunRecord> filter_runs(std::vector<RunRecord> runs, const std::string& where) {
  if (where.empty()) return runs;
  const sweep::Expression expr = sweep::Expression::parse(where);
  std::vector<RunRecord> out;
  for (RunRecord& r : runs) {
    const sweep::Lookup lookup = [&](const std::string& name) -> sweep::Value {
      const auto it = r.params.find(name);
      if (it != r.params.end()) return it->second;
      if (name == "status") return sweep::Value(r.status);
      if (name == "sweep") return sweep::Value(r.sweep);
      throw Error(fmt::format("--where: run {} has no parameter '{}'", r.id, name));
    };
    if (expr.evaluate(lookup).truthy()) out.push_back(std::move(r));
  }
  return out;
}

const std::deque<ReportKind>& report_kinds() { return kind_table(); }

std::vector<std::string> report_kind_names() {
  std::vector<std::string> names;
  for (const ReportKind& k : report_kinds()) names.push_back(k.name);
  return names;
}

const ReportKind& report_kind(const std::string& name) {
  for (const ReportKind& k : report_kinds()) {
    if (k.name == name) return k;
  }
  throw Error(
      fmt::format("unknown report type '{}'; allowed: {}", name, join(report_kind_names(), ", ")));
}

void register_report_kind(ReportKind kind) {
  DLSCALE_CHECK(!kind.name.empty() && kind.build != nullptr,
                "a report type needs a name and a build");
  for (const ReportKind& k : report_kinds()) {
    DLSCALE_CHECK(k.name != kind.name, "report type '{}' is taken", kind.name);
  }
  kind_table().push_back(std::move(kind));
}

std::string report_type_help() {
  std::vector<std::string> parts;
  for (const ReportKind& k : report_kinds())
    parts.push_back(k.name + (k.help.empty() ? "" : " " + k.help));
  return join(parts, " | ");
}
Format parse_format(const std::string& s) { return kFormatNames.parse(s); }

}  // namespace dlscale::report
