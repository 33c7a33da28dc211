#include "report/report.h"

#include "report/commbench_report.h"
#include "report/report_parts.h"
#include "report/tta_report.h"

#include "core/enum_names.h"
#include "core/error.h"

namespace dlscale::report {
namespace {

constexpr EnumNames<ReportType, 11> kTypeNames{"report type",
                                               {{{ReportType::kWeak, "weak"},
                                                 {ReportType::kStrong, "strong"},
                                                 {ReportType::kBreakdown, "breakdown"},
                                                 {ReportType::kCompare, "compare"},
                                                 {ReportType::kCommbench, "commbench"},
                                                 {ReportType::kIo, "io"},
                                                 {ReportType::kTta, "tta"},
                                                 {ReportType::kMemory, "memory"},
                                                 {ReportType::kNoise, "noise"},
                                                 {ReportType::kBatch, "batch"},
                                                 {ReportType::kPredict, "predict"}}}};
constexpr EnumNames<Format, 4> kFormatNames{
    "format", {{{Format::kText, "text"}, {Format::kMarkdown, "markdown"}, {Format::kCsv, "csv"}, {Format::kJson, "json"}}}};

}  // namespace

Report build_report(const std::vector<RunRecord>& all, const ReportOptions& o) {
  DLSCALE_CHECK(!all.empty(), "no runs in the selection");
  if (o.type == ReportType::kCommbench) return commbench_report(all);
  // Collective benchmarks have no throughput or step time: not scaling data.
  std::vector<RunRecord> runs;
  for (const RunRecord& r : all) {
    if (!is_commbench_run(r)) runs.push_back(r);
  }
  DLSCALE_CHECK(!runs.empty(), "the selection holds only commbench runs; use --type commbench");
  switch (o.type) {
    case ReportType::kWeak:
      return scaling_report(runs, "weak");
    case ReportType::kStrong:
      return scaling_report(runs, "strong");
    case ReportType::kBreakdown:
      return breakdown_report(runs);
    case ReportType::kCompare:
      return compare_report(runs, o);
    case ReportType::kIo:
      return io_report(runs);
    case ReportType::kTta:
      return tta_report(runs);
    case ReportType::kMemory:
      return memory_report(runs);
    case ReportType::kNoise:
      return noise_report(runs);
    case ReportType::kBatch:
      return batch_report(runs);
    case ReportType::kCommbench:
    case ReportType::kPredict:
      break;
  }
  throw InternalError("unknown report type");
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

ReportType parse_report_type(const std::string& s) { return kTypeNames.parse(s); }
std::string to_string(ReportType type) { return kTypeNames.name(type); }
Format parse_format(const std::string& s) { return kFormatNames.parse(s); }

}  // namespace dlscale::report
