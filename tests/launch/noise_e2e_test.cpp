// --noise-scale end to end through the real binary: every strategy that
// averages gradients measures the same noise scale from the same gradients,
// one worker measures it over micro-batches, and what cannot be measured is
// refused in one line.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "process_util.h"
#include "weights_util.h"

namespace dlscale {
namespace {

using testing::run_dlscale;
using testing::train;
using testing::TrainRun;

const std::string kLenet =
    "train --model lenet --dropout 0 --threads 1 --steps 4 --warmup 1 --optimizer momentum "
    "--lr 0.05 --synthetic-batches 2 --display-every 0 --global-batch 16 --first-bucket-mb 0.01 "
    "--noise-scale";

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

TEST(NoiseScale, EveryAveragingStrategyMeasuresTheSameEstimate) {
  const TrainRun allreduce = train(kLenet + " --workers 2 --bucket-mb 0.2");
  const nlohmann::json& ref = allreduce.record["results"]["noise"];
  ASSERT_TRUE(ref.is_object()) << allreduce.record["results"].dump();
  EXPECT_EQ(ref["b_small"], 8.0);
  EXPECT_EQ(ref["b_big"], 16.0);
  EXPECT_EQ(ref["small_batch"], "worker");
  EXPECT_EQ(ref["steps"], 4);
  EXPECT_EQ(ref["course"]["b_simple"].size(), 4u);
  EXPECT_GT(ref["trace_sigma"].get<double>(), 0);
  for (const std::string setup : {"--bucket-mb 0", "--strategy tree --bucket-mb 0.2",
                                  "--strategy hierarchical --ranks-per-node 1 --bucket-mb 0.2",
                                  "--strategy zero --zero-stage 1 --bucket-mb 0.2",
                                  "--strategy zero --zero-stage 2 --bucket-mb 0.2",
                                  "--strategy zero --zero-stage 3 --bucket-mb 0.2"}) {
    SCOPED_TRACE(setup);
    const TrainRun r = train(kLenet + " --workers 2 " + setup);
    expect_same_estimate(r.record["results"]["noise"], ref);
  }
}

// Accumulation: a worker's small batch is its whole step; one worker's is a
// micro-batch. Sparse embedding rows count as their dense gradient does.
TEST(NoiseScale, AccumulationAndSparseRowsSetTheBatchesMeasured) {
  const TrainRun two = train(kLenet + " --workers 2 --accumulate 2 --bucket-mb 0.2");
  EXPECT_EQ(two.record["results"]["noise"]["b_small"], 8.0);  // 4 per micro-batch x 2
  EXPECT_EQ(two.record["results"]["noise"]["b_big"], 16.0);
  const TrainRun one = train(kLenet + " --accumulate 4");
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
}

TEST(NoiseScale, WhatCannotBeMeasuredIsOneLine) {
  const std::string lenet = "train --model lenet --steps 2 --warmup 1 --noise-scale";
  const auto alone = run_dlscale(lenet);
  EXPECT_EQ(alone.code, 2);
  EXPECT_NE(alone.err.find("--noise-scale compares gradients over two batch sizes"),
            std::string::npos)
      << alone.err;
  const auto ps = run_dlscale(lenet + " --workers 2 --strategy ps");
  EXPECT_EQ(ps.code, 2);
  EXPECT_NE(ps.err.find("which only the parameter server's shards see"), std::string::npos)
      << ps.err;
  const auto independent = run_dlscale(lenet + " --workers 2 --strategy independent");
  EXPECT_EQ(independent.code, 2);
  EXPECT_NE(independent.err.find("--strategy independent averages none"), std::string::npos)
      << independent.err;
}

}  // namespace
}  // namespace dlscale
