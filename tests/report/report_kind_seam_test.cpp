// The report-type recipe of docs/architecture.md, followed by a test: a
// report written here (runs counted by status) is registered and then
// built, rendered in every format and named in --type's help like the
// shipped ones, with no file of src/ naming it.
#include <gtest/gtest.h>

#include <map>

#include "core/error.h"
#include "report/report.h"

namespace dlscale::report {
namespace {

using sweep::RunRecord;
using sweep::Value;

RunRecord toy_run(std::int64_t id, const std::string& kind, const std::string& status) {
  RunRecord r;
  r.id = id;
  r.sweep = "toy";
  r.params = {{"kind", Value(kind)}, {"workers", Value(1)}};
  r.status = status;
  return r;
}

/// The toy report: how many runs ended in each status.
Report status_report(const std::vector<RunRecord>& runs, const ReportOptions& /*options*/) {
  std::map<std::string, int> counts;
  for (const RunRecord& r : runs) ++counts[r.status];
  Report rep;
  rep.title = "Runs by status";
  Table t;
  t.title = rep.title;
  t.headers = {"status", "runs"};
  t.numeric = {false, true};
  for (const auto& [status, n] : counts) t.rows.push_back({{status, {}}, {std::to_string(n), n}});
  rep.tables.push_back(t);
  rep.data = t;
  return rep;
}

/// Registered once for the whole test binary (a registry refuses a name twice).
const ReportKind& toy_kind() {
  static const bool registered = [] {
    register_report_kind({"toy-status", "(runs counted by status)", status_report});
    return true;
  }();
  (void)registered;
  return report_kind("toy-status");
}

TEST(ReportKindSeam, ARegisteredReportIsBuiltRenderedAndListedLikeAShippedOne) {
  EXPECT_EQ(toy_kind().name, "toy-status");
  EXPECT_NE(report_type_help().find("| toy-status (runs counted by status)"), std::string::npos)
      << report_type_help();
  const std::vector<RunRecord> runs = {
      toy_run(1, "dlscale", "completed"), toy_run(2, "dlscale", "oom"),
      toy_run(3, "dlscale", "completed"), toy_run(4, "commbench", "completed")};
  const Report rep = build_report(runs, {"toy-status", "", ""});
  EXPECT_EQ(rep.type, "toy-status");
  // Not a kind that reads commbench runs: run 4 was dropped before it.
  ASSERT_EQ(rep.data.rows.size(), 2u);
  EXPECT_EQ(rep.data.rows[0][0].text, "completed");
  EXPECT_EQ(rep.data.rows[0][1].value, 2);
  EXPECT_EQ(rep.data.rows[1][0].text, "oom");
  EXPECT_EQ(render(rep, Format::kCsv), "status,runs\ncompleted,2\noom,1\n");
  EXPECT_NE(render(rep, Format::kJson).find("\"type\": \"toy-status\""), std::string::npos);
  EXPECT_NE(render(rep, Format::kText).find("Runs by status"), std::string::npos);
  EXPECT_NE(render(rep, Format::kMarkdown).find("| completed |"), std::string::npos);
}

TEST(ReportKindSeam, TheRegistryRefusesWhatItCannotServe) {
  toy_kind();
  try {
    register_report_kind({"toy-status", "", status_report});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "report type 'toy-status' is taken");
  }
  EXPECT_THROW(register_report_kind({"no-build", "", nullptr}), Error);
  EXPECT_THROW(register_report_kind({"", "", status_report}), Error);
  try {
    report_kind("toy");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("unknown report type 'toy'; allowed: weak, strong, ", 0),
              0u)
        << e.what();
    EXPECT_NE(std::string(e.what()).find(", predict, toy-status"), std::string::npos) << e.what();
  }
  // predict is listed for --type but built by `dlscale report`, which has its calibrations.
  try {
    build_report({toy_run(1, "dlscale", "completed")}, {"predict", "", ""});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "--type predict is built by 'dlscale report' (it needs --calibrate)");
  }
}

}  // namespace
}  // namespace dlscale::report
