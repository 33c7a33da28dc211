// report --type batch: steps to target against the global batch, the model
// fitted to them, and the prediction from the smallest batch alone, on runs
// whose steps follow S = 300 (1 + 200/B) exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "report/html.h"
#include "report/report.h"

namespace dlscale::report {
namespace {

using sweep::RunRecord;
using sweep::Value;

constexpr double kSamples = 60000;  // per epoch

double model_steps(double batch) { return 300 * (1 + 200 / batch); }

/// A 2-worker run to a target at global batch `batch`: reached it after
/// `steps` (or, aborted, ran them without reaching it), with a noise scale.
RunRecord target_run(std::int64_t id, const std::string& scaling_rule, int batch, int seed,
                     double steps, bool reached, double b_simple) {
  RunRecord r;
  r.id = id;
  r.sweep = "batch";
  r.status = "completed";
  r.params = {{"model", Value("tinycnn")},
              {"scaling", Value("strong")},
              {"workers", Value(2)},
              {"batch", Value(batch / 2)},
              {"global-batch", Value(batch)},
              {"seed", Value(seed)},
              {"lr-scaling", Value(scaling_rule)},
              {"synthetic-batches", Value(60000 / batch)}};
  sweep::RepeatRecord rep;
  rep.repeat = 1;
  rep.status = "completed";
  rep.metrics = {{"samples_per_sec", 1000},
                 {"step_time_ms", 10},
                 {"conv_success", reached ? 1 : 0},
                 {"conv_steps_done", steps},
                 {"noise_b_simple", b_simple}};
  if (reached) rep.metrics["conv_epochs_to_target"] = steps * batch / kSamples;
  r.repeats.push_back(rep);
  return r;
}

/// linear: 32..256, seeds at 0.9, 1 and 1.1 of the model's steps (median
/// exact) and one more at 256 that never got there; none: steps that do not
/// fall with the batch.
std::vector<RunRecord> study() {
  std::vector<RunRecord> runs;
  std::int64_t id = 0;
  for (int b : {32, 64, 128, 256}) {
    for (int seed = 1; seed <= 3; ++seed) {
      runs.push_back(
          target_run(++id, "linear", b, seed, model_steps(b) * (0.8 + 0.1 * seed), true, 150));
    }
  }
  runs.push_back(target_run(++id, "linear", 256, 4, 5000, false, 170));
  for (int b : {32, 64}) runs.push_back(target_run(++id, "none", b, 1, 1000, true, 90));
  return runs;
}

TEST(BatchReport, FitsTheMeasuredCurveAndPredictsFromTheSmallestBatch) {
  const Report r = build_report(study(), {"batch", "", ""});
  const Table& t = r.tables.at(0);
  ASSERT_EQ(t.rows.size(), 6u);  // linear: 4 batches; none: 2
  const auto column = [&](const std::string& name) {
    return static_cast<size_t>(std::find(t.headers.begin(), t.headers.end(), name) -
                               t.headers.begin());
  };
  EXPECT_EQ(t.rows[0][column("global batch")].text, "32");
  EXPECT_EQ(*t.rows[0][column("steps")].value, model_steps(32));
  EXPECT_EQ(t.rows[3][column("reached")].text, "3");
  EXPECT_EQ(t.rows[3][column("runs")].text, "4");  // the aborted run counts, its steps do not
  EXPECT_DOUBLE_EQ(*t.rows[3][column("B_simple")].value,
                   150);  // of 150, 150, 150 and the aborted run's 170
  EXPECT_NEAR(*t.rows[2][column("steps fitted")].value, model_steps(128), 1e-6);
  // From 32 alone with B_simple 150: E(256) = E(32) (1 + 256/150) / (1 + 32/150).
  const double e32 = model_steps(32) * 32 / kSamples, e256 = model_steps(256) * 256 / kSamples;
  const double predicted = e32 * (1 + 256.0 / 150) / (1 + 32.0 / 150);
  EXPECT_NEAR(*t.rows[3][column("epochs from B0")].value, predicted, 1e-9);
  EXPECT_NEAR(*t.rows[3][column("error %")].value, 100 * (predicted / e256 - 1), 1e-9);
  const std::string notes = fmt::format("{}", fmt::join(r.notes, "\n"));
  EXPECT_NE(
      notes.find("tinycnn lr-scaling=linear: fitted S_min 300 steps, E_min 1 epochs, B_crit 200"),
      std::string::npos)
      << notes;
  EXPECT_NE(notes.find("tinycnn lr-scaling=none: no fit: steps do not fall"), std::string::npos)
      << notes;
  EXPECT_NE(notes.find("fitted B_crit / B_simple = 1.33"), std::string::npos) << notes;
  EXPECT_NE(render(r, Format::kCsv).find("epochs_from_b0"), std::string::npos);
  EXPECT_NE(render_html(study(), {}).find("Steps to target vs global batch"), std::string::npos);
}

// Runs with Adam also stored the noise scale of its preconditioned
// gradient: the column shows it, and the prediction from B0 takes it.
TEST(BatchReport, FromB0TakesAdamsPreconditionedNoiseScaleWhereMeasured) {
  std::vector<RunRecord> runs = study();
  for (RunRecord& r : runs) r.repeats[0].metrics["noise_adam_b_simple"] = 400;
  const Report r = build_report(runs, {"batch", "", ""});
  const Table& t = r.tables.at(0);
  const auto column = [&](const std::string& name) {
    return static_cast<size_t>(std::find(t.headers.begin(), t.headers.end(), name) -
                               t.headers.begin());
  };
  EXPECT_DOUBLE_EQ(*t.rows[3][column("B_adam")].value, 400);
  EXPECT_DOUBLE_EQ(*t.rows[3][column("B_simple")].value, 150);
  const double e32 = model_steps(32) * 32 / kSamples;
  EXPECT_NEAR(*t.rows[3][column("epochs from B0")].value,
              e32 * (1 + 256.0 / 400) / (1 + 32.0 / 400), 1e-9);
  const std::string notes = fmt::format("{}", fmt::join(r.notes, "\n"));
  EXPECT_NE(notes.find("B_adam at B0 = 32: 400 (fitted B_crit / B_adam = 0.50)"), std::string::npos)
      << notes;
  // Without it (SGD), the column is empty and B0 takes B_simple.
  const Report plain = build_report(study(), {"batch", "", ""});
  EXPECT_EQ(plain.tables.at(0).rows[3][column("B_adam")].text, "");
}

// Runs that measured the noise scale at their final weights (train
// --noise-final, a count that varies with the batch as the pool's does):
// one study still, the final columns show the medians, and B0's model
// takes the final B_simple over the training's, and the final B_adam over
// both. Without them the columns are not there.
TEST(BatchReport, FromB0TakesTheFinalWeightsNoiseScaleWhereMeasured) {
  std::vector<RunRecord> runs = study();
  runs.resize(13);  // linear only
  for (RunRecord& r : runs) {
    const double b = static_cast<double>(sweep::param_int(r.params, "global-batch"));
    r.params["noise-final"] = Value(static_cast<int>(16384 / b));
    r.repeats[0].metrics["noise_final_b_simple"] = 250;
  }
  const auto column = [](const Table& t, const std::string& name) {
    return static_cast<size_t>(std::find(t.headers.begin(), t.headers.end(), name) -
                               t.headers.begin());
  };
  const double e32 = model_steps(32) * 32 / kSamples;
  const Report r = build_report(runs, {"batch", "", ""});
  const Table& t = r.tables.at(0);
  ASSERT_EQ(t.rows.size(), 4u);  // one study of 4 batches, not one per noise-final
  EXPECT_DOUBLE_EQ(*t.rows[3][column(t, "final B_simple")].value, 250);
  EXPECT_EQ(t.rows[3][column(t, "final B_adam")].text, "");
  EXPECT_NEAR(*t.rows[3][column(t, "epochs from B0")].value,
              e32 * (1 + 256.0 / 250) / (1 + 32.0 / 250), 1e-9);
  const std::string notes = fmt::format("{}", fmt::join(r.notes, "\n"));
  EXPECT_NE(notes.find("final B_simple at B0 = 32: 250 (fitted B_crit / final B_simple = 0.80)"),
            std::string::npos)
      << notes;
  for (RunRecord& run : runs) {
    run.repeats[0].metrics["noise_adam_b_simple"] = 400;
    run.repeats[0].metrics["noise_final_adam_b_simple"] = 800;
  }
  const Report adam = build_report(runs, {"batch", "", ""});
  const Table& a = adam.tables.at(0);
  EXPECT_NEAR(*a.rows[3][column(a, "epochs from B0")].value,
              e32 * (1 + 256.0 / 800) / (1 + 32.0 / 800), 1e-9);
  const Report plain = build_report(study(), {"batch", "", ""});
  const std::vector<std::string>& headers = plain.tables.at(0).headers;
  EXPECT_EQ(std::count(headers.begin(), headers.end(), "final B_simple"), 0);
}

TEST(BatchReport, RunsWithoutATargetAreNamed) {
  std::vector<RunRecord> runs = study();
  for (RunRecord& r : runs) r.repeats[0].metrics.erase("conv_success");
  try {
    build_report(runs, {"batch", "", ""});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no run in the selection trained to a target"),
              std::string::npos);
  }
}

}  // namespace
}  // namespace dlscale::report
