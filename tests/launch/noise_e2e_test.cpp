// --noise-scale end to end through the real binary: every strategy that
// averages gradients measures the same noise scale from the same gradients,
// one worker measures it over micro-batches, a run of several averaging
// workers measures every 10th step unasked (--noise-every), and what cannot
// be measured is refused in one line when asked for.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "process_util.h"
#include "weights_util.h"

namespace dlscale {
namespace {

using testing::run_dlscale;
using testing::train;
using testing::TrainRun;

const std::string kLenetRecipe =
    "train --model lenet --dropout 0 --threads 1 --warmup 1 --optimizer momentum --lr 0.05 "
    "--synthetic-batches 2 --display-every 0 --global-batch 16 --first-bucket-mb 0.01";
const std::string kLenetUnasked = kLenetRecipe + " --steps 4";
const std::string kNoiseLenet = kLenetUnasked + " --noise-scale";

// Every strategy that averages on 2 workers, beside the bucketed allreduce
// the tests take for reference: flat allreduce, tree, hierarchical, zero
// (each stage), the parameter server (colocated, dedicated).
const std::vector<std::string> kOtherAveragingSetups = {
    "--bucket-mb 0",
    "--strategy tree --bucket-mb 0.2",
    "--strategy hierarchical --ranks-per-node 1 --bucket-mb 0.2",
    "--strategy zero --zero-stage 1 --bucket-mb 0.2",
    "--strategy zero --zero-stage 2 --bucket-mb 0.2",
    "--strategy zero --zero-stage 3 --bucket-mb 0.2",
    "--strategy ps --ps-shards 2 --bucket-mb 0.2",
    "--strategy ps --ps-placement dedicated --bucket-mb 0"};

// Step by step: the estimates of |G|^2 and tr(Σ) (|G|^2 can be negative
// early: a 4-step run's estimate is noisy), and B_simple where defined. The
// squared norms are float32 dot products (1e-6 or so); |G|^2 is a
// difference of terms of the size of tr(Σ)/b_small, which bounds its error.
void expect_same_estimate(const nlohmann::json& mine, const nlohmann::json& theirs) {
  ASSERT_TRUE(mine.is_object());
  const nlohmann::json& a = mine["course"];
  const nlohmann::json& b = theirs["course"];
  ASSERT_EQ(a["step"], b["step"]);
  const double b_small = theirs["b_small"].get<double>();
  for (size_t s = 0; s < b["step"].size(); ++s) {
    SCOPED_TRACE("step " + std::to_string(s));
    const double sigma = b["trace_sigma"][s].get<double>(), g2 = b["gradient_sq"][s].get<double>();
    EXPECT_NEAR(a["trace_sigma"][s].get<double>(), sigma, 1e-4 * std::abs(sigma));
    const double g2_tol = 1e-4 * std::max(std::abs(g2), std::abs(sigma) / b_small);
    EXPECT_NEAR(a["gradient_sq"][s].get<double>(), g2, g2_tol);
    ASSERT_EQ(a["b_simple"][s].is_null(), b["b_simple"][s].is_null());
    if (b["b_simple"][s].is_null()) continue;
    const double bs = b["b_simple"][s].get<double>();
    EXPECT_NEAR(a["b_simple"][s].get<double>(), bs, std::abs(bs) * (1e-4 + g2_tol / std::abs(g2)));
  }
}

/// What a run measuring only `steps` would record, from an every-step
/// run's course: each step's own estimate is recovered from the moving
/// average (ema_n = c_n (1 - d^n), x_n = (ema_n - d ema_{n-1}) / (1 - d)),
/// and the kept steps' estimates are averaged again.
nlohmann::json measured_on(const nlohmann::json& every_step, const std::vector<int>& steps) {
  const double d = every_step["decay"].get<double>();
  const nlohmann::json& course = every_step["course"];
  nlohmann::json out = every_step;
  out["course"] = {{"step", steps}};
  for (const char* part : {"gradient_sq", "trace_sigma"}) {
    std::vector<double> raw;
    double previous = 0;
    for (size_t n = 0; n < course["step"].size(); ++n) {
      const double ema = course[part][n].get<double>() * (1 - std::pow(d, n + 1.0));
      raw.push_back((ema - d * previous) / (1 - d));
      previous = ema;
    }
    double ema = 0;
    for (size_t k = 0; k < steps.size(); ++k) {
      ema = d * ema + (1 - d) * raw.at(static_cast<size_t>(steps[k]));
      out["course"][part].push_back(ema / (1 - std::pow(d, k + 1.0)));
    }
  }
  for (size_t k = 0; k < steps.size(); ++k) {
    const double g2 = out["course"]["gradient_sq"][k].get<double>();
    out["course"]["b_simple"].push_back(
        g2 > 0 ? nlohmann::json(out["course"]["trace_sigma"][k].get<double>() / g2)
               : nlohmann::json());
  }
  return out;
}

TEST(NoiseScale, EveryAveragingStrategyMeasuresTheSameEstimate) {
  const TrainRun allreduce = train(kNoiseLenet + " --workers 2 --bucket-mb 0.2");
  const nlohmann::json& ref = allreduce.record["results"]["noise"];
  ASSERT_TRUE(ref.is_object()) << allreduce.record["results"].dump();
  EXPECT_EQ(ref["b_small"], 8.0);
  EXPECT_EQ(ref["b_big"], 16.0);
  EXPECT_EQ(ref["small_batch"], "worker");
  EXPECT_EQ(ref["steps"], 4);
  EXPECT_EQ(ref["every"], 1);
  EXPECT_EQ(ref["course"]["b_simple"].size(), 4u);
  EXPECT_GT(ref["trace_sigma"].get<double>(), 0);
  for (const std::string& setup : kOtherAveragingSetups) {
    SCOPED_TRACE(setup);
    const TrainRun r = train(kNoiseLenet + " --workers 2 " + setup);
    expect_same_estimate(r.record["results"]["noise"], ref);
  }
  // Every third step: the same gradients, measured on steps 0 and 3 alone.
  const TrainRun third = train(kNoiseLenet + " --workers 2 --bucket-mb 0.2 --noise-every 3");
  const nlohmann::json& n = third.record["results"]["noise"];
  ASSERT_TRUE(n.is_object()) << third.record["results"].dump();
  EXPECT_EQ(n["every"], 3);
  EXPECT_EQ(n["steps"], 2);
  expect_same_estimate(n, measured_on(ref, {0, 3}));
}

// Under Adam the record also holds the noise scale of the preconditioned
// gradient, the same under every strategy: where the workers hold Adam's
// state (allreduce, tree, hierarchical), a shard of it each (zero, each
// stage: P^2 is put together over the workers), or none (ps, colocated or
// dedicated: the shards take both sums of P^2 g^2 and send them with the
// averaged gradient's norm); under SGD it is null.
TEST(NoiseScale, AdamsPreconditionedEstimateIsTheSameWhereWorkersHoldItsState) {
  const std::string adam =
      "train --model lenet --dropout 0 --threads 1 --warmup 1 --optimizer adam --lr 0.001 "
      "--synthetic-batches 2 --display-every 0 --global-batch 16 --first-bucket-mb 0.01 --steps 4 "
      "--noise-scale --workers 2";
  const TrainRun allreduce = train(adam + " --bucket-mb 0.2");
  nlohmann::json ref = allreduce.record["results"]["noise"]["preconditioned"];
  ASSERT_TRUE(ref.is_object()) << allreduce.record["results"]["noise"].dump();
  EXPECT_EQ(ref["optimizer"], "adam");
  EXPECT_EQ(ref["steps"], 3);  // step 0 has no state yet
  EXPECT_EQ(ref["course"]["step"], nlohmann::json({1, 2, 3}));
  ref["b_small"] = 8.0;
  for (const std::string& setup : kOtherAveragingSetups) {
    SCOPED_TRACE(setup);
    const TrainRun r = train(adam + " " + setup);
    expect_same_estimate(r.record["results"]["noise"]["preconditioned"], ref);
  }
  const TrainRun sgd = train(kNoiseLenet + " --workers 2");
  EXPECT_TRUE(sgd.record["results"]["noise"]["preconditioned"].is_null());
  // Unasked (every 10th step, no --noise-scale), Adam's is not measured.
  std::string unasked = adam;
  unasked.erase(unasked.find(" --noise-scale"), 14);
  unasked.replace(unasked.find("--steps 4"), 9, "--steps 12");
  const TrainRun quiet = train(unasked);
  EXPECT_TRUE(quiet.record["results"]["noise"]["b_simple"].is_number());
  EXPECT_TRUE(quiet.record["results"]["noise"]["preconditioned"].is_null());
}

// Unasked, a run of several workers that average on the workers measures
// every 10th step; one that cannot measure, or is told --noise-every 0,
// records no noise scale and is not refused.
TEST(NoiseScale, UnaskedEveryTenthStepOfAnAveragingRunIsMeasured) {
  const TrainRun two = train(kLenetRecipe + " --workers 2 --steps 12 --compress fp16");
  const nlohmann::json& n = two.record["results"]["noise"];
  ASSERT_TRUE(n.is_object()) << two.record["results"].dump();
  EXPECT_EQ(n["every"], 10);
  EXPECT_EQ(n["course"]["step"], nlohmann::json({0, 10}));
  EXPECT_EQ(two.record["inputs"]["noise_every"], 10);
  EXPECT_EQ(two.record["inputs"]["noise_scale"], false);
  EXPECT_GT(n["trace_sigma"].get<double>(), 0);
  for (const std::string setup :
       {" --workers 1", " --workers 2 --strategy ps --ps-mode async",
        " --workers 2 --strategy independent", " --workers 2 --noise-every 0"}) {
    SCOPED_TRACE(setup);
    const TrainRun r = train(kLenetUnasked + setup);
    EXPECT_TRUE(r.record["results"]["noise"].is_null()) << r.record["results"]["noise"].dump();
    EXPECT_EQ(r.record["inputs"]["noise_every"], 0);
  }
}

// Accumulation: a worker's small batch is its whole step; one worker's is a
// micro-batch. Sparse embedding rows count as their dense gradient does.
TEST(NoiseScale, AccumulationAndSparseRowsSetTheBatchesMeasured) {
  const TrainRun two = train(kNoiseLenet + " --workers 2 --accumulate 2 --bucket-mb 0.2");
  EXPECT_EQ(two.record["results"]["noise"]["b_small"], 8.0);  // 4 per micro-batch x 2
  EXPECT_EQ(two.record["results"]["noise"]["b_big"], 16.0);
  const TrainRun one = train(kNoiseLenet + " --accumulate 4");
  const nlohmann::json& n = one.record["results"]["noise"];
  EXPECT_EQ(n["small_batch"], "micro-batch");
  EXPECT_EQ(n["b_small"], 4.0);
  EXPECT_EQ(n["b_big"], 16.0);
  EXPECT_TRUE(n["trace_sigma"].is_number());
  const std::string ncf =
      "train --model ncf --lr 0.05 --dropout 0 --threads 1 --steps 3 --warmup 1 "
      "--optimizer momentum --synthetic-batches 2 --display-every 0 --global-batch 12 "
      "--noise-scale --workers 2";
  const TrainRun dense = train(ncf);
  const TrainRun sparse = train(ncf + " --sparse-embeddings");
  expect_same_estimate(sparse.record["results"]["noise"], dense.record["results"]["noise"]);
  // Under Adam, a sparse row takes its rows of the preconditioner.
  std::string adam = ncf;
  adam.replace(adam.find("--optimizer momentum"), 20, "--optimizer adam");
  const TrainRun dense_adam = train(adam);
  const TrainRun sparse_adam = train(adam + " --sparse-embeddings");
  nlohmann::json ref = dense_adam.record["results"]["noise"]["preconditioned"];
  ASSERT_TRUE(ref.is_object()) << dense_adam.record["results"]["noise"].dump();
  ref["b_small"] = dense_adam.record["results"]["noise"]["b_small"];
  expect_same_estimate(sparse_adam.record["results"]["noise"]["preconditioned"], ref);
}

// --noise-final: after the last step, 6 more global batches at the final
// weights, applied to nothing. One worker's gradient of a batch of 16 is the
// 2 workers' average of 8 each (lenet has no batch norm), so every strategy
// that averages on the workers, and one worker alone, measure the same
// estimate from the same gradients; the weights end as without it.
TEST(NoiseScale, FinalWeightsGiveTheSameEstimateUnderEveryAveragingStrategy) {
  std::string recipe = kLenetRecipe + " --steps 4 --noise-every 0";
  recipe.replace(recipe.find("--synthetic-batches 2"), 21, "--synthetic-batches 8");
  const TrainRun plain = train(recipe + " --workers 2 --bucket-mb 0.2");
  const TrainRun alone = train(recipe + " --noise-final 6");
  const nlohmann::json& ref = alone.record["results"]["noise"]["final"];
  ASSERT_TRUE(ref.is_object()) << alone.record["results"].dump();
  EXPECT_EQ(ref["steps"], 6);
  EXPECT_EQ(ref["batch"], 16.0);
  const double sigma = ref["trace_sigma"].get<double>(), g2 = ref["gradient_sq"].get<double>();
  EXPECT_GT(sigma, 0);
  EXPECT_NE(ref["summary"].get<std::string>().find("at the final weights"), std::string::npos);
  for (const std::string& setup : {std::string("--bucket-mb 0.2"), std::string("--bucket-mb 0"),
                                   std::string("--strategy tree --bucket-mb 0.2"),
                                   std::string("--strategy hierarchical --ranks-per-node 1")}) {
    SCOPED_TRACE(setup);
    const TrainRun r = train(recipe + " --workers 2 --noise-final 6 " + setup);
    EXPECT_TRUE(testing::same_weights(r.weights, plain.weights));
    const nlohmann::json& f = r.record["results"]["noise"]["final"];
    ASSERT_TRUE(f.is_object()) << r.record["results"].dump();
    EXPECT_EQ(f["steps"], 6);
    // float32 gradients summed in another order: |G|^2 is a difference of
    // terms of the size of tr(Σ)/batch, which bounds its error.
    EXPECT_NEAR(f["trace_sigma"].get<double>(), sigma, 1e-3 * sigma);
    EXPECT_NEAR(f["gradient_sq"].get<double>(), g2, 1e-3 * std::max(std::abs(g2), sigma / 16));
    EXPECT_EQ(f["b_simple"].is_null(), ref["b_simple"].is_null());
  }
  // The training's own estimate is not there (--noise-every 0): only "final".
  EXPECT_FALSE(alone.record["results"]["noise"].contains("b_simple"));
}

TEST(NoiseScale, WhatCannotBeMeasuredIsOneLine) {
  const std::string lenet = "train --model lenet --steps 2 --warmup 1 --noise-scale";
  const auto alone = run_dlscale(lenet);
  EXPECT_EQ(alone.code, 2);
  EXPECT_NE(alone.err.find("--noise-scale compares gradients over two batch sizes"),
            std::string::npos)
      << alone.err;
  const auto ps = run_dlscale(lenet + " --workers 2 --strategy ps --ps-mode async");
  EXPECT_EQ(ps.code, 2);
  EXPECT_NE(ps.err.find("which --ps-mode async never forms"), std::string::npos) << ps.err;
  const auto independent = run_dlscale(lenet + " --workers 2 --strategy independent");
  EXPECT_EQ(independent.code, 2);
  EXPECT_NE(independent.err.find("--strategy independent averages none"), std::string::npos)
      << independent.err;
  const std::string unasked = "train --model lenet --steps 2 --warmup 1";
  for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
           {unasked + " --noise-every 2", "--noise-scale compares gradients over two batch sizes"},
           {unasked + " --workers 2 --strategy ps --ps-mode async --noise-every 5",
            "which --ps-mode async never forms"},
           {unasked + " --workers 2 --noise-every -3", "--noise-every must be in [0, "},
           {lenet + " --workers 2 --noise-every 0", "--noise-every 0 for none"},
           {unasked + " --noise-final 1", "--noise-final must be 0 (none) or in [2, "},
           {unasked + " --noise-final -2", "--noise-final must be 0 (none) or in [2, "},
           {unasked + " --noise-final 3", "cycles through --synthetic-batches 1"},
           {unasked + " --workers 2 --strategy ps --noise-final 4",
            "--strategy ps forms it on its shards"},
           {unasked + " --workers 2 --strategy zero --noise-final 4",
            "--strategy zero keeps a shard"},
           {unasked + " --workers 2 --strategy independent --noise-final 4",
            "--noise-final needs the workers' averaged gradient"}}) {
    SCOPED_TRACE(args);
    const auto r = run_dlscale(args);
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace dlscale
