// Every strategy end to end through the real binary, with real worker
// processes (Gloo via the local launcher, and mpirun): N workers on shards
// of a global batch reach the weights of one worker on the whole batch,
// replicas stay identical, and the record shows the bytes each rank sent.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <tuple>

#include "core/files.h"
#include "process_util.h"
#include "weights_util.h"

namespace dlscale {
namespace {

using testing::closeness;
using testing::expect_tcp_bytes;
using testing::load_weights;
using testing::train;
using testing::TrainRun;
using testing::run_dlscale;
using testing::run_shell;
using testing::temp_path;

// Global batch 12 divides by 2, 3 and 4 workers.
const std::string kStrategiesLenet =
    "train --model lenet --dropout 0 --threads 1 --steps 4 --warmup 1 --optimizer momentum "
    "--lr 0.05 --synthetic-batches 2 --display-every 0 --global-batch 12 --first-bucket-mb 0.01 "
    "--bucket-mb 0.2";

const std::vector<torch::Tensor>& lenet_reference() {
  static const std::vector<torch::Tensor> ref = train(kStrategiesLenet).weights;  // one worker
  return ref;
}

/// Checks what every synchronous strategy's record must say.
void expect_synchronous_record(const nlohmann::json& r, const std::string& strategy, int n) {
  const nlohmann::json& c = r["results"]["comm"];
  EXPECT_EQ(r["inputs"]["strategy"], strategy);
  EXPECT_EQ(c["strategy"], strategy);
  EXPECT_EQ(c["replicas_should_match"], true);
  EXPECT_EQ(c["replicas_identical"], true);
  ASSERT_EQ(c["bytes_sent_per_step_formula"].size(), static_cast<size_t>(n));
  ASSERT_EQ(c["bytes_sent_per_step_tcp"].size(), static_cast<size_t>(n));
  for (int rank = 0; rank < n; ++rank) {
    const double formula = c["bytes_sent_per_step_formula"][rank].get<double>();
    EXPECT_GT(formula, 0) << "rank " << rank;
    // Gloo's TCP traffic is the formula's payload plus small headers.
    if (c["backend"] == "gloo") expect_tcp_bytes(c, rank, formula);
  }
}

class GlooStrategies : public ::testing::TestWithParam<std::string> {};

// Float32: rtol 1e-5, as the bucketed allreduce always had.
TEST_P(GlooStrategies, MatchOneWorkerOn2To4Workers) {
  const std::string strategy = GetParam();
  for (const int n : {2, 3, 4}) {
    SCOPED_TRACE(strategy + " x" + std::to_string(n));
    const std::string extra = strategy == "hierarchical" ? " --ranks-per-node 2" : "";
    const TrainRun r = train(kStrategiesLenet + " --workers " + std::to_string(n) + " --strategy " +
                             strategy + extra);
    EXPECT_LE(closeness(r.weights, lenet_reference(), 1e-5, 1e-7), 1.0);
    expect_synchronous_record(r.record, strategy, n);
    if (strategy == "hierarchical") {
      EXPECT_EQ(r.record["results"]["comm"]["nodes"], (n + 1) / 2);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Strategies, GlooStrategies,
                         ::testing::Values("allreduce", "tree", "hierarchical"));

// Compressed gradients are rounded once to the wire type (after the 1/N
// scaling) and the sum once more: each step's update is off by at most about
// 2 ulps of the wire type relative to the gradient (fp16 2^-10, bf16 2^-7).
// Over 4 momentum-SGD steps at lr 0.05 on lenet's ~0.01-0.1 weights that is
// far below the tolerances used here (rtol = 2^-10 resp. 2^-7 of a weight,
// atol 1e-4 resp. 1e-3 for weights near zero), while the weights do differ
// from the uncompressed run (the test would catch compression doing nothing).
TEST(CompressedStrategies, MatchOneWorkerWithinTheWireTypesPrecision) {
  for (const std::string strategy : {"allreduce", "tree", "hierarchical"}) {
    for (const std::string compress : {"fp16", "bf16"}) {
      SCOPED_TRACE(strategy + " " + compress);
      const TrainRun r = train(kStrategiesLenet + " --workers 3 --strategy " + strategy +
                               " --compress " + compress);
      const bool fp16 = compress == "fp16";
      EXPECT_LE(closeness(r.weights, lenet_reference(), fp16 ? 1.0 / 1024 : 1.0 / 128,
                          fp16 ? 1e-4 : 1e-3),
                1.0);
      EXPECT_GT(closeness(r.weights, lenet_reference(), 1e-7, 0), 1.0);
      expect_synchronous_record(r.record, strategy, 3);
      EXPECT_EQ(r.record["results"]["comm"]["wire_dtype"], fp16 ? "float16" : "bfloat16");
      EXPECT_EQ(r.record["results"]["comm"]["bytes_per_step"], 3274634 * 2);
    }
  }
}

// Independent replicas: no bytes on the wire, replicas that differ.
TEST(IndependentStrategy, SendsNothingAndReplicasDiffer) {
  const TrainRun r = train(kStrategiesLenet + " --workers 2 --strategy independent");
  const nlohmann::json& c = r.record["results"]["comm"];
  EXPECT_EQ(c["strategy"], "independent");
  EXPECT_EQ(c["bytes_per_step"], 0);
  EXPECT_EQ(c["replicas_should_match"], false);
  EXPECT_EQ(c["replicas_identical"], false);
  for (const auto& b : c["bytes_sent_per_step_formula"]) EXPECT_EQ(b, 0);
  // No gradient bytes; the TCP counters may still see the acknowledgement of
  // the barrier that starts the steps arrive inside the window (a few bytes).
  for (const auto& b : c["bytes_sent_per_step_tcp"]) {
    ASSERT_TRUE(b.is_number()) << c.dump();
    EXPECT_LT(b.get<double>(), 1024.0);
  }
  EXPECT_GT(closeness(r.weights, lenet_reference(), 1e-3, 1e-5), 1.0);
}

// Under mpirun (MPI backend): every strategy on 3 ranks, and 2 and 4 for tree;
// collectives blocking under the watchdog (the default) and polled.
TEST(MpirunStrategies, MatchOneWorker) {
  DLSCALE_SKIP_WITHOUT_MPI();
  const std::string polled = " --mpi-collectives polled";
  const std::vector<std::tuple<std::string, int, std::string>> cases = {
      {"tree", 2, ""},          {"tree", 3, ""},
      {"tree", 4, ""},          {"hierarchical", 3, ""},
      {"hierarchical", 4, ""},  {"allreduce", 3, ""},
      {"allreduce", 3, polled}, {"hierarchical", 4, polled}};
  for (const auto& [strategy, np, extra] : cases) {
    SCOPED_TRACE(strategy + " x" + std::to_string(np) + extra);
    const std::string w = temp_path("wm.pt");
    const auto o = run_shell(
        "mpirun --oversubscribe --allow-run-as-root -np " + std::to_string(np) + " " +
        std::string(DLSCALE_BINARY) + " " + kStrategiesLenet + " --strategy " + strategy +
        (strategy == "hierarchical" ? " --ranks-per-node 2" : "") + extra + " --save-weights " + w);
    ASSERT_EQ(o.code, 0) << o.err;
    EXPECT_NE(o.out.find("communication: mpi " + strategy), std::string::npos) << o.out;
    EXPECT_NE(o.out.find("replicas: identical\n"), std::string::npos) << o.out;
    EXPECT_LE(closeness(load_weights(w), lenet_reference(), 1e-5, 1e-7), 1.0);
  }
}

// A model with batch norm: statistics are per worker (as in DDP without
// SyncBatchNorm), so N workers cannot match one worker on the global batch;
// every synchronous strategy must instead match the flat allreduce on the
// same N workers, and keep the replicas identical, with --sync-buffers step.
TEST(BatchNormStrategies, MatchFlatAllreduceOnTheSameWorkers) {
  const std::string resnet =
      "train --model resnet18 --image-size 16 --classes 10 --threads 1 --steps 3 --warmup 1 "
      "--optimizer momentum --lr 0.05 --display-every 0 --global-batch 8 --workers 2 "
      "--sync-buffers step --first-bucket-mb 0.5";
  const TrainRun flat = train(resnet + " --strategy allreduce --bucket-mb 0");
  for (const std::string strategy : {"allreduce", "tree", "hierarchical"}) {
    SCOPED_TRACE(strategy);
    const TrainRun r = train(resnet + " --bucket-mb 4 --strategy " + strategy);
    EXPECT_LE(closeness(r.weights, flat.weights, 1e-5, 1e-6), 1.0);
    expect_synchronous_record(r.record, strategy, 2);
    EXPECT_GT(r.record["results"]["comm"]["buckets"].get<int>(), 1);
  }
}

TEST(StrategyErrors, BadCombinationsAreRefusedInOneLine) {
  auto o = run_dlscale("train --model lenet --strategy ring");
  EXPECT_EQ(o.code, 2);
  EXPECT_EQ(o.err,
            "dlscale: error: unknown --strategy 'ring'; allowed: allreduce, tree, hierarchical, "
            "independent, ps, zero\n");
  o = run_dlscale("train --model lenet --strategy independent --compress fp16");
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("--compress fp16 needs a strategy that exchanges gradients"),
            std::string::npos)
      << o.err;
  o = run_dlscale("train --model lenet --compress fp8");
  EXPECT_EQ(o.err, "dlscale: error: unknown --compress 'fp8'; allowed: none, fp16, bf16\n");
  o = run_dlscale("train --model lenet --ranks-per-node 2");
  EXPECT_NE(o.err.find("--ranks-per-node applies to --strategy hierarchical only"),
            std::string::npos)
      << o.err;
}

}  // namespace
}  // namespace dlscale
