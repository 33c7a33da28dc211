// McCandlish et al.'s model of steps and epochs to target (core/batch_model.h)
// and predict --tta on top of the scaling model (predict/tta.h), and
// report --type predict --tta (predict/predict_report.h).
#include "predict/tta.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "core/batch_model.h"
#include "core/error.h"
#include "predict/predict_report.h"

namespace dlscale::predict {
namespace {

TEST(BatchModel, OneRunAndItsNoiseScaleGiveTheCurve) {
  // E0 = 2 epochs at B0 = 100 with B_noise 100: E_min = 1, and S x B = E x D.
  const BatchModel m = model_from_run(2, 100, 100, 50000);
  EXPECT_DOUBLE_EQ(m.e_min(), 1);
  EXPECT_DOUBLE_EQ(m.epochs(100), 2);
  EXPECT_DOUBLE_EQ(m.epochs(300), 4);  // 1 + 300/100
  EXPECT_DOUBLE_EQ(m.steps(100), 1000);
  EXPECT_DOUBLE_EQ(m.s_min, 500);
  EXPECT_DOUBLE_EQ(m.steps(300) * 300, m.epochs(300) * 50000);
  EXPECT_THROW(model_from_run(2, 100, std::nan(""), 50000), Error);
  EXPECT_THROW(model_from_run(2, 100, -5, 50000), Error);
  EXPECT_THROW(model_from_run(0, 100, 5, 50000), Error);
}

TEST(BatchModel, TheFitRecoversTheCurveAndSaysWhenThereIsNone) {
  const BatchModel truth{400, 256, 60000};
  std::vector<StepsPoint> points;
  for (double b : {32, 64, 128, 256, 512}) points.push_back({b, truth.steps(b)});
  const BatchFit fit = fit_steps(points, 60000);
  ASSERT_TRUE(fit.ok) << fit.why;
  EXPECT_NEAR(fit.model.s_min, 400, 1e-9);
  EXPECT_NEAR(fit.model.b_noise, 256, 1e-9);
  EXPECT_NEAR(fit.rms_relative_error, 0, 1e-12);
  // Steps that do not fall, steps that fall faster than 1/B, one batch only.
  EXPECT_EQ(fit_steps({{32, 100}, {64, 120}}, 60000).why,
            "steps do not fall as the batch grows (fitted B_noise not positive)");
  EXPECT_EQ(fit_steps({{32, 1000}, {64, 100}}, 60000).why,
            "steps fall as 1/B or faster (fitted S_min not positive): no bend yet, B_crit lies "
            "past the batches "
            "measured");
  EXPECT_FALSE(fit_steps({{32, 1000}, {32, 1100}}, 60000).ok);
  EXPECT_THROW(fit_steps({{32, -1}, {64, 10}}, 60000), Error);
}

/// A record of a 2-worker run at batch 16 with 2 micro-batches (global 64)
/// that reached top-1 0.9 after 1.5 epochs and 1500 steps.
nlohmann::json reached_record() {
  return {{"kind", "train"},
          {"model", {{"name", "tinycnn"}}},
          {"inputs", {{"batch", 16}, {"world_size", 2}, {"accumulate", 2}}},
          {"results",
           {{"convergence",
             {{"target", 0.9},
              {"status", "success"},
              {"metric", "top1"},
              {"epochs_to_target", 1.5},
              {"steps_done", 1500}}},
            {"noise", {{"b_simple", 64.0}}}}}};
}

TEST(Tta, TheRecordGivesEpochsBatchAndNoiseScale) {
  const TtaRun r = tta_run_from_record(reached_record(), "run.json");
  EXPECT_EQ(r.global_batch, 64);
  EXPECT_EQ(r.samples_per_epoch, 1500.0 * 64 / 1.5);
  EXPECT_EQ(r.metric, "top1");
  EXPECT_DOUBLE_EQ(r.model_fit.epochs(64), 1.5);
  EXPECT_DOUBLE_EQ(r.model_fit.e_min(), 0.75);  // 1.5 / (1 + 64/64)
  const auto fails = [](const nlohmann::json& j) {
    try {
      tta_run_from_record(j, "run.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  nlohmann::json j = reached_record();
  j["results"]["convergence"]["status"] = "aborted";
  EXPECT_NE(fails(j).find("did not reach its target (status 'aborted')"), std::string::npos);
  j = reached_record();
  j["results"]["convergence"] = nullptr;
  EXPECT_NE(fails(j).find("the run had no target"), std::string::npos);
  j = reached_record();
  j["results"].erase("noise");
  EXPECT_NE(fails(j).find("no gradient noise scale (train --noise-scale)"), std::string::npos);
  j = reached_record();
  j["results"]["noise"]["b_simple"] = nullptr;
  EXPECT_NE(fails(j).find("noise scale is undefined"), std::string::npos);
  j["results"]["noise"]["b_simple"] = -4.0;
  EXPECT_NE(fails(j).find("noise scale is -4, not positive"), std::string::npos);
}

// With Adam's preconditioned noise scale in the record, auto and adam take
// it as B_crit and simple takes B_simple; adam without one, and an unknown
// kind, are refused in one line.
// With the noise scale at the final weights (train --noise-final), auto
// takes it (Adam's there where measured), final and final-adam ask for
// one of them, and the ones over training stay available; a record without
// it, or with an undefined one, is refused for the final kinds in one line.
TEST(Tta, TheFinalWeightsNoiseScaleWhereTheRecordHasIt) {
  nlohmann::json j = reached_record();
  for (const std::string kind : {"final", "final-adam"}) {
    try {
      tta_run_from_record(j, "run.json", kind);
      FAIL() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("run.json: --tta-noise " + kind +
                                           " needs the noise scale at the final weights"),
                std::string::npos)
          << e.what();
    }
  }
  j["results"]["noise"]["final"] = {{"b_simple", 256.0}};
  for (const std::string kind : {"auto", "final"}) {
    const TtaRun r = tta_run_from_record(j, "run.json", kind);
    EXPECT_EQ(r.noise, "final B_simple");
    EXPECT_DOUBLE_EQ(r.model_fit.b_noise, 256);
    EXPECT_DOUBLE_EQ(r.model_fit.e_min(), 1.5 / (1 + 64.0 / 256));
  }
  EXPECT_DOUBLE_EQ(tta_run_from_record(j, "run.json", "simple").model_fit.b_noise, 64);
  EXPECT_THROW(tta_run_from_record(j, "run.json", "final-adam"), Error);
  j["results"]["noise"]["final"]["preconditioned"] = {{"b_simple", 512.0}};
  EXPECT_EQ(tta_run_from_record(j, "run.json").noise, "final B_adam");
  EXPECT_DOUBLE_EQ(tta_run_from_record(j, "run.json", "final-adam").model_fit.b_noise, 512);
  EXPECT_DOUBLE_EQ(tta_run_from_record(j, "run.json", "final").model_fit.b_noise, 256);
  // B_simple undefined there but B_adam not: auto takes that one.
  j["results"]["noise"]["final"] = {{"b_simple", nullptr},
                                    {"preconditioned", {{"b_simple", 512.0}}}};
  EXPECT_EQ(tta_run_from_record(j, "run.json").noise, "final B_adam");
  // Undefined at the final weights: auto falls back to the training's.
  j["results"]["noise"]["final"] = {{"b_simple", nullptr}};
  EXPECT_EQ(tta_run_from_record(j, "run.json").noise, "B_simple");
  try {
    tta_run_from_record(j, "run.json", "final");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "run.json: the noise scale at the final weights is undefined or not positive; more "
              "--noise-final batches give a defined one");
  }
}

TEST(Tta, AdamsPreconditionedNoiseScaleWhereTheRecordHasIt) {
  nlohmann::json j = reached_record();
  EXPECT_EQ(tta_run_from_record(j, "run.json").noise, "B_simple");
  EXPECT_THROW(tta_run_from_record(j, "run.json", "adam"), Error);
  j["results"]["noise"]["preconditioned"] = {{"b_simple", 192.0}};
  for (const std::string kind : {"auto", "adam"}) {
    const TtaRun r = tta_run_from_record(j, "run.json", kind);
    EXPECT_EQ(r.noise, "B_adam");
    EXPECT_EQ(r.b_adam, 192);
    EXPECT_DOUBLE_EQ(r.model_fit.b_noise, 192);
    EXPECT_DOUBLE_EQ(r.model_fit.e_min(), 1.5 / (1 + 64.0 / 192));
  }
  const TtaRun simple = tta_run_from_record(j, "run.json", "simple");
  EXPECT_EQ(simple.noise, "B_simple");
  EXPECT_DOUBLE_EQ(simple.model_fit.b_noise, 64);
  try {
    tta_run_from_record(j, "run.json", "hessian");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "--tta-noise 'hessian' is not one of auto, simple, adam, final, final-adam");
  }
  j["results"]["noise"]["preconditioned"]["b_simple"] = nullptr;  // undefined: B_simple
  const TtaRun undefined = tta_run_from_record(j, "run.json");
  EXPECT_EQ(undefined.noise, "B_simple");
  EXPECT_TRUE(undefined.adam_measured);
  EXPECT_EQ(undefined.b_adam, 0);
  try {
    tta_run_from_record(j, "run.json", "adam");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(
        std::string(e.what()).find("--tta-noise adam needs Adam's preconditioned noise scale"),
        std::string::npos);
  }
}

/// One worker: 10 ms of compute at batch 32 and a 4 MB gradient.
Workload small_workload() {
  Workload w;
  w.model = "m";
  w.batch = 32;
  w.forward_s = 0.003;
  w.backward_s = 0.006;
  w.optimizer_s = 0.001;
  w.grads = {{4000000, 0.006, 0}};
  return w;
}

Network ten_gbit() {
  Network n;
  n.workers_per_node = 1;
  n.intra = {20e-6, 1.25e9};
  n.inter = {20e-6, 1.25e9};
  return n;
}

TEST(Tta, TimeToTargetIsStepsTimesThePredictedStep) {
  const TtaRun run = tta_run_from_record(reached_record(), "run.json");
  PredictOptions o;
  o.workers = {1, 2, 4, 8, 16, 64};
  const std::vector<StrategySpec> specs = {parse_strategy("allreduce")};
  const TtaPrediction p = predict_tta(small_workload(), ten_gbit(), specs, o, run, 0);
  ASSERT_EQ(p.strategies.size(), 1u);
  const std::vector<TtaPoint>& pts = p.strategies[0].points;
  EXPECT_DOUBLE_EQ(p.t1_s, 0.010);
  EXPECT_DOUBLE_EQ(pts[0].time_s, run.model_fit.steps(32) * pts[0].step_s);
  EXPECT_DOUBLE_EQ(pts[0].speedup, 1);
  const Prediction step = predict(small_workload(), ten_gbit(), specs, o);
  for (size_t i = 0; i < pts.size(); ++i) {
    EXPECT_DOUBLE_EQ(pts[i].global_batch, 32.0 * o.workers[i]);
    EXPECT_DOUBLE_EQ(pts[i].step_s, step.strategies[0].points[i].step_s);
    EXPECT_DOUBLE_EQ(pts[i].epochs, run.model_fit.epochs(pts[i].global_batch));
    EXPECT_DOUBLE_EQ(pts[i].device_hours, o.workers[i] * pts[i].time_s / 3600);
  }
  // Steps stop falling past B_crit while each step gets dearer: the fastest
  // N lies inside the range, and one worker costs least.
  const size_t fastest = p.strategies[0].fastest;
  EXPECT_GT(fastest, 0u);
  EXPECT_LT(fastest, pts.size() - 1);
  EXPECT_EQ(p.strategies[0].cheapest, 0u);
  const nlohmann::json j = tta_json(p);
  EXPECT_EQ(j["strategies"][0]["fastest_workers"], pts[fastest].workers);
  EXPECT_EQ(j["model"]["b_crit"], 64.0);
}

TEST(Tta, TheGlobalBatchStopsAtItsCap) {
  const TtaRun run = tta_run_from_record(reached_record(), "run.json");
  PredictOptions o;
  o.workers = {1, 4, 16};
  const std::vector<StrategySpec> specs = {parse_strategy("allreduce")};
  const TtaPrediction p = predict_tta(small_workload(), ten_gbit(), specs, o, run, 128);
  EXPECT_EQ(p.strategies[0].points[1].global_batch, 128);
  EXPECT_EQ(p.strategies[0].points[2].global_batch, 128);  // 8 per worker
  EXPECT_LT(p.strategies[0].points[2].step_s, p.strategies[0].points[1].step_s);
  o.workers = {1, 256};
  EXPECT_THROW(predict_tta(small_workload(), ten_gbit(), specs, o, run, 128), Error);
}

TEST(Tta, ThePageThinsALongListOfNAndKeepsTheFastest) {
  const TtaRun run = tta_run_from_record(reached_record(), "run.json");
  PredictOptions o;
  for (long long n = 1; n <= 500; ++n) o.workers.push_back(n);  // every N
  const std::vector<StrategySpec> specs = {parse_strategy("allreduce")};
  const TtaPrediction p = predict_tta(small_workload(), ten_gbit(), specs, o, run, 0);
  ASSERT_EQ(p.strategies[0].points.size(), 500u);
  const std::string page = tta_html(p, o.workers, {});
  size_t circles = 0;
  for (size_t at = page.find("<circle"); at != std::string::npos; at = page.find("<circle", at + 1))
    ++circles;
  EXPECT_LE(circles, 2u * 24);  // two charts of about 24 points
  const TtaPoint& fastest = p.strategies[0].points[p.strategies[0].fastest];
  EXPECT_NE(page.find(fmt::format("fastest: N = {} (", fastest.workers)), std::string::npos);
}

/// A stored run of `model` on `workers` x `batch` that trained to top-1 0.9:
/// reached in `steps` steps and `tta_s` seconds (4 s of them evaluating,
/// 1 s writing checkpoints), else aborted (steps < 0).
sweep::RunRecord tta_stored_run(long long id, const std::string& model, int workers, int batch,
                                double steps, double tta_s) {
  nlohmann::json conv = {{"target", 0.9},
                         {"metric", "top1"},
                         {"eval_s", 4.0},
                         {"checkpoint_s", 1.0},
                         {"run_s", tta_s}};
  conv["status"] = steps > 0 ? "success" : "aborted";
  conv["steps_done"] = steps > 0 ? steps : 3000.0;
  conv["time_to_accuracy_s"] = steps > 0 ? nlohmann::json(tta_s) : nlohmann::json();
  const nlohmann::json record = {
      {"kind", "train"},
      {"model", {{"name", model}}},
      {"inputs", {{"model", model}, {"batch", batch}, {"world_size", workers}, {"seed", id}}},
      {"results", {{"convergence", conv}}}};
  sweep::RunRecord run;
  run.id = id;
  sweep::RepeatRecord r;
  r.status = sweep::kStatusCompleted;
  r.record = record.dump();
  run.repeats.push_back(r);
  return run;
}

TEST(TtaReport, EachRunOfTheModelAndTargetGetsItsMeasuredStepsAndTimeBesideThePredicted) {
  // B0: 2 workers x 32 reached the target in 1,500 steps, 1.5 epochs,
  // B_simple 64, so S(B) = 750 (1 + 64/B): 2,250 steps at 32, 1,500 at 64.
  nlohmann::json b0 =
      nlohmann::json::parse(tta_stored_run(2, "m", 2, 32, 1500, 20).repeats[0].record);
  b0["results"]["convergence"]["epochs_to_target"] = 1.5;
  b0["results"]["noise"] = {{"b_simple", 64.0}};
  const TtaRun tta = tta_run_from_record(b0, "b0.json");
  std::vector<sweep::RunRecord> runs = {
      tta_stored_run(1, "m", 1, 32, 2000, 30),   // 1 worker: its step is the calibration's 10 ms
      tta_stored_run(2, "m", 2, 32, 1500, 20),   // the --tta record's own run
      tta_stored_run(3, "m", 2, 32, -1, 40),     // aborted
      tta_stored_run(4, "other", 1, 32, 900, 9)  // another model: left out
  };
  runs[1].repeats[0].record = b0.dump();
  SweepCheckInputs in;
  in.calibrations = {small_workload()};
  in.calibrations[0].model = "m";
  in.base = ten_gbit();
  const report::Report rep = predict_tta_report(runs, in, tta, b0);
  const report::Table& d = rep.data;
  ASSERT_EQ(d.rows.size(), 3u);
  const auto column = [&](const std::string& name) {
    return static_cast<size_t>(std::find(d.headers.begin(), d.headers.end(), name) -
                               d.headers.begin());
  };
  const auto value = [&](size_t row, const std::string& name) {
    return d.rows[row][column(name)].value;
  };
  // Run 1: 2,250 steps predicted x 10 ms = 22.5 s against 30 - 4 - 1 = 25 s.
  EXPECT_DOUBLE_EQ(*value(0, "steps"), 2000);
  EXPECT_DOUBLE_EQ(*value(0, "steps_predicted"), 2250);
  EXPECT_DOUBLE_EQ(*value(0, "train_s"), 25);
  EXPECT_NEAR(*value(0, "train_s_predicted"), 22.5, 1e-9);
  EXPECT_NEAR(*value(0, "error_pct"), -10, 1e-9);
  EXPECT_NEAR(*value(0, "steps_error_pct"), 12.5, 1e-9);
  EXPECT_DOUBLE_EQ(*value(0, "time_to_target_s"), 30);
  // The --tta run: its own steps exactly, marked, and not in the errors.
  EXPECT_DOUBLE_EQ(*value(1, "steps_predicted"), 1500);
  EXPECT_EQ(d.rows[1][column("tta_record")].text, "true");
  EXPECT_EQ(d.rows[0][column("tta_record")].text, "false");
  // The aborted run: the prediction alone.
  EXPECT_FALSE(value(2, "steps").has_value());
  EXPECT_FALSE(value(2, "error_pct").has_value());
  EXPECT_DOUBLE_EQ(*value(2, "steps_predicted"), 1500);
  ASSERT_GE(rep.notes.size(), 3u);
  EXPECT_EQ(
      rep.notes[1],
      "by configuration (median of its seeds), training time to target: median |error| 10.0%, "
      "largest "
      "10.0%; 1 of 1 within 25%; steps: median |error| 12.5%, largest 12.5%; 1 of 1 within 25%");
  // By configuration: 1 worker at 32, and 2 at 64 without B0's run (the
  // aborted one alone: nothing to compare).
  ASSERT_EQ(rep.tables.size(), 2u);
  const report::Table& groups = rep.tables[1];
  ASSERT_EQ(groups.rows.size(), 2u);
  EXPECT_EQ(groups.rows[0][4].text, "1/1");
  EXPECT_NEAR(*groups.rows[0][10].value, -10, 1e-9);
  EXPECT_EQ(groups.rows[1][4].text, "0/1");
  EXPECT_FALSE(groups.rows[1][10].value.has_value());
  EXPECT_EQ(rep.notes.back(), "1 run(s) did not reach the target");
  // --calibrate-busy: the 2-worker runs compute at the busy times, the
  // 1-worker run alone; a note names the record.
  SweepCheckInputs busy_in = in;
  Workload busy = in.calibrations[0];
  busy.forward_s *= 2;
  busy.backward_s *= 2;
  for (Gradient& g : busy.grads) g.ready_s *= 2;
  busy.side_by_side = 2;
  busy.source = "busy.json";
  busy_in.busy_calibrations = {busy};
  const report::Report busy_rep = predict_tta_report(runs, busy_in, tta, b0);
  EXPECT_DOUBLE_EQ(*busy_rep.data.rows[0][column("train_s_predicted")].value,
                   *value(0, "train_s_predicted"));
  EXPECT_GT(*busy_rep.data.rows[1][column("train_s_predicted")].value,
            *value(1, "train_s_predicted") * 1.2);
  EXPECT_EQ(busy_rep.notes.back(), "m (runs of 2 or more workers): compute busy.json");
  // No run of the record's model and target: one line naming them.
  b0["results"]["convergence"]["target"] = 0.8;
  try {
    predict_tta_report(runs, in, tta_run_from_record(b0, "b0.json"), b0);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "no completed run in the selection trained m to top1 >= 0.8 (the --tta record's "
              "model and target)");
  }
}

}  // namespace
}  // namespace dlscale::predict
