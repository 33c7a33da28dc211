// --accumulate K end to end through the real binary: N workers summing K
// micro-batches each reach the weights of one worker on the whole global
// batch under every strategy, exchange once per step (the kernel's TCP
// counters), and record and trace the micro-batches.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "core/files.h"
#include "process_util.h"
#include "weights_util.h"

namespace dlscale {
namespace {

using testing::closeness;
using testing::expect_tcp_bytes;
using testing::temp_path;
using testing::train;
using testing::TrainRun;

// Global batch 12: 1 worker x 12, or N workers x K micro-batches of 12/(N K).
const std::string kLenetSteps =
    "train --model lenet --dropout 0 --threads 1 --warmup 1 --optimizer momentum --lr 0.05 "
    "--synthetic-batches 2 --display-every 0 --global-batch 12 --first-bucket-mb 0.01 --steps ";
const std::string kAccumulateLenet = kLenetSteps + "4";

TEST(Accumulate, MicroBatchesMatchOneWorkerOnTheGlobalBatchUnderEveryStrategy) {
  const TrainRun one = train(kAccumulateLenet);
  ASSERT_FALSE(one.weights.empty());
  const std::vector<std::string> setups = {
      "--accumulate 2",
      "--workers 2 --accumulate 3",
      "--workers 2 --accumulate 2 --bucket-mb 0",
      "--workers 2 --accumulate 3 --strategy tree",
      "--workers 4 --accumulate 3 --strategy hierarchical --ranks-per-node 2",
      "--workers 2 --accumulate 2 --strategy ps",
      "--workers 2 --accumulate 2 --strategy zero --zero-stage 1",
      "--workers 2 --accumulate 2 --strategy zero --zero-stage 2",
      "--workers 3 --accumulate 2 --strategy zero --zero-stage 3"};
  for (const std::string& setup : setups) {
    SCOPED_TRACE(setup);
    const bool flat = setup.find("--bucket-mb") != std::string::npos;
    const TrainRun r = train(kAccumulateLenet + (flat ? " " : " --bucket-mb 0.2 ") + setup);
    ASSERT_FALSE(r.weights.empty());
    EXPECT_LE(closeness(r.weights, one.weights, 1e-5, 1e-7), 1.0);
    const nlohmann::json& inputs = r.record["inputs"];
    EXPECT_EQ(inputs["global_batch"], 12);
    EXPECT_EQ(inputs["accumulate"].get<int>() * inputs["batch"].get<int>() *
                  inputs["world_size"].get<int>(),
              12);
    if (inputs["world_size"] == 1) continue;
    const nlohmann::json& c = r.record["results"]["comm"];
    EXPECT_EQ(c["replicas_identical"], true);
    if (setup.find("ps") != std::string::npos) continue;  // its servers' traffic is the PS tests'
    // Once per step: K exchanges would send K times the formula's bytes.
    for (int rank = 0; rank < inputs["world_size"].get<int>(); ++rank) {
      expect_tcp_bytes(c, rank, c["bytes_sent_per_step_formula"][rank].get<double>());
    }
  }
}

// Batch norm sees each micro-batch alone, so these compare runs with equal
// micro-batches: zero stage 3 gathering unit by unit against allreduce
// (resnet18's blocks), and sparse embedding rows against one worker (ncf).
// resnet18's micro-batches hold 12 samples, as Stage3UnitByUnitMatchesAllreduce's
// workers do. Batch norm amplifies a change of summation order: with 4
// samples (tree against allreduce on 6 workers) to 3.5e5 times the bound in
// 3 steps, with 12 (4 workers against 2 accumulating 2) to 1.8. The runs
// compared here sum in the same order and agree exactly here.
TEST(Accumulate, UnitByUnitGatheringAndSparseRowsMatchTheirReferences) {
  const std::string resnet =
      "train --model resnet18 --image-size 16 --classes 10 --threads 1 --steps 3 --warmup 1 "
      "--display-every 0 --synthetic-batches 2 --global-batch 48 --optimizer momentum --lr 0.01 "
      "--workers 2 --accumulate 2";
  const TrainRun allreduce = train(resnet);
  const TrainRun block = train(resnet + " --strategy zero --zero-stage 3 --zero-unit block");
  ASSERT_FALSE(block.weights.empty());
  EXPECT_LE(closeness(block.weights, allreduce.weights, 1e-5, 1e-7), 1.0);
  const std::string ncf =
      "train --model ncf --lr 0.05 --dropout 0 --threads 1 --steps 3 --warmup 1 "
      "--optimizer momentum --synthetic-batches 2 --display-every 0 --global-batch 12 "
      "--first-bucket-mb 1 --bucket-mb 8";
  const TrainRun dense = train(ncf);
  const TrainRun sparse = train(ncf + " --sparse-embeddings --workers 2 --accumulate 3");
  ASSERT_FALSE(sparse.weights.empty());
  EXPECT_LE(closeness(sparse.weights, dense.weights, 1e-5, 1e-7), 1.0);
  // 2 samples a micro-batch, 3 micro-batches, 4 tables: the rows of all three travel.
  EXPECT_EQ(sparse.record["results"]["sparse"]["rows_per_step"], 24.0);
}

// The trace shows every micro-batch's forward and backward and one exchange
// per step; the step's phases add them up.
TEST(Accumulate, TraceAndPhasesShowEachMicroBatch) {
  const std::string trace = temp_path("trace.json");
  const TrainRun r = train(kAccumulateLenet + " --workers 2 --accumulate 3 --trace " + trace);
  ASSERT_FALSE(r.weights.empty());
  const nlohmann::json t = nlohmann::json::parse(read_file(trace));
  const nlohmann::json& events = t.is_object() ? t["traceEvents"] : t;
  std::map<std::pair<std::string, int>, int> spans;
  for (const auto& e : events) {
    if (e.value("ph", "") == "X") ++spans[{e.value("name", ""), e.value("pid", -1)}];
  }
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ((spans[{"forward", rank}]), 12) << "rank " << rank;  // 4 steps x 3
    EXPECT_EQ((spans[{"backward", rank}]), 12) << "rank " << rank;
    EXPECT_EQ((spans[{"wait for gradients", rank}]), 4) << "rank " << rank;
    EXPECT_EQ((spans[{"optimizer", rank}]), 4) << "rank " << rank;
  }
  const nlohmann::json& b = r.record["results"]["breakdown_ms"];
  for (const char* phase : {"forward", "backward", "optimizer"})
    EXPECT_GT(b[phase].get<double>(), 0) << phase;
  std::filesystem::remove(trace);
}

// A checkpoint taken between steps holds no micro-batch's gradient: 2
// steps, then 2 more from the checkpoint, are 4 steps bit for bit.
TEST(Accumulate, ResumedRunEqualsTheStraightOne) {
  const std::string ckpt = temp_path("ckpt");
  const std::string run = " --workers 2 --accumulate 3";
  const TrainRun first =
      train(kLenetSteps + "2" + run + " --checkpoint " + ckpt + " --checkpoint-every 2");
  ASSERT_TRUE(std::filesystem::exists(ckpt));
  const TrainRun resumed = train(kLenetSteps + "4" + run + " --resume " + ckpt);
  const TrainRun straight = train(kLenetSteps + "4" + run);
  ASSERT_EQ(resumed.weights.size(), straight.weights.size());
  ASSERT_FALSE(straight.weights.empty());
  for (size_t i = 0; i < straight.weights.size(); ++i) {
    EXPECT_TRUE(torch::equal(resumed.weights[i], straight.weights[i])) << "tensor " << i;
  }
  EXPECT_EQ(resumed.record["steps"]["step"].front(), 2);
  std::filesystem::remove(ckpt);
}

}  // namespace
}  // namespace dlscale
