// The parameter server end to end through the real binary, with real
// processes (Gloo via the local launcher, and mpirun): synchronous PS on N
// workers matches one worker on the global batch; asynchronous PS learns,
// keeps its staleness bound and, with one worker, is exactly synchronous.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <tuple>
#include <vector>

#include "process_util.h"
#include "weights_util.h"

namespace dlscale {
namespace {

using testing::closeness;
using testing::expect_tcp_bytes;
using testing::load_weights;
using testing::run_dlscale;
using testing::run_shell;
using testing::temp_path;
using testing::train;
using testing::TrainRun;

// Global batch 12 divides by 1, 2, 3 and 4 workers. lenet's parameters:
// 3,274,634 floats in 10 tensors, one of them (fc1) 12.85 MB.
const std::string kPsLenet =
    "train --model lenet --dropout 0 --threads 1 --steps 4 --warmup 1 --optimizer momentum "
    "--lr 0.05 --synthetic-batches 2 --display-every 0 --global-batch 12 --first-bucket-mb 0.01 "
    "--bucket-mb 0.2 --timeout 30";
constexpr int64_t kLenetBytes = 3274634 * 4;

const std::vector<torch::Tensor>& ps_lenet_reference() {
  static const std::vector<torch::Tensor> ref = train(kPsLenet).weights;  // one worker, no PS
  return ref;
}

/// What every PS record must say: shard bytes add up to the model, each
/// shard receives N copies of its share per step and sends as many back.
void expect_ps_record(const nlohmann::json& r, int n, int k, const std::string& placement) {
  const nlohmann::json& ps = r["results"]["ps"];
  const nlohmann::json& c = r["results"]["comm"];
  EXPECT_EQ(c["strategy"], "ps");
  EXPECT_EQ(c["replicas_identical"], true);
  EXPECT_EQ(ps["placement"], placement);
  EXPECT_EQ(ps["shards"], k);
  EXPECT_EQ(r["inputs"]["world_size"], n);  // servers are not workers
  ASSERT_EQ(ps["shard_bytes"].size(), static_cast<size_t>(k));
  ASSERT_EQ(ps["per_shard"].size(), static_cast<size_t>(k));
  int64_t total = 0;
  for (int s = 0; s < k; ++s) {
    const int64_t bytes = ps["shard_bytes"][s].get<int64_t>();
    EXPECT_GT(bytes, 0) << "shard " << s;
    total += bytes;
    const nlohmann::json& sh = ps["per_shard"][s];
    EXPECT_EQ(sh["bytes"], bytes);
    EXPECT_DOUBLE_EQ(sh["bytes_in_per_step"].get<double>(), static_cast<double>(n * bytes));
    EXPECT_DOUBLE_EQ(sh["bytes_out_per_step"].get<double>(), static_cast<double>(n * bytes));
  }
  EXPECT_EQ(total, kLenetBytes);
  EXPECT_GE(ps["imbalance"].get<double>(), 1.0);
  // Each worker process sends its pushes to other processes' shards and, when
  // it hosts shard k, the pulls to the other workers: S + (N-2) S_k (S
  // without a shard). The TCP counters see that plus a few header bytes on a
  // worker without a shard; a colocated shard's thread sends its pulls on
  // its own clock, so up to a step's pulls fall on either side of the
  // measured window there (docs/strategies.md), and only the formula is checked.
  ASSERT_EQ(c["bytes_sent_per_step_formula"].size(), static_cast<size_t>(n));
  for (int rank = 0; rank < n; ++rank) {
    const bool hosts = placement == "colocated" && rank < k;
    const double expected =
        static_cast<double>(kLenetBytes) +
        (hosts ? (n - 2) * ps["shard_bytes"][rank].get<double>() : 0.0);
    EXPECT_DOUBLE_EQ(c["bytes_sent_per_step_formula"][rank].get<double>(), expected) << rank;
    if (n > 1 && !hosts) expect_tcp_bytes(c, rank, expected);
  }
}

// N = 2, 3, 4 workers; K = 1, 2, 3 shards; colocated and dedicated;
// round-robin and greedy; split tensors; overlapped and flat pushes; SGD
// with momentum (the shards own the momentum). Float32 tolerance as for
// the allreduce strategies: the shard averages the same gradients.
TEST(PsSync, MatchesOneWorkerOnTheGlobalBatch) {
  const std::vector<std::tuple<int, int, std::string, std::string>> cases = {
      {2, 1, "colocated", "--ps-assign round-robin"},
      {3, 2, "dedicated", "--ps-assign greedy"},
      {4, 3, "colocated", "--ps-assign greedy --ps-partition-mb 1"},
      {2, 3, "dedicated", "--ps-assign round-robin --bucket-mb 0"},
      {3, 3, "colocated", "--ps-assign round-robin --ps-partition-mb 4"},
      {1, 2, "dedicated", "--ps-assign greedy"},
      {1, 1, "colocated", ""}};  // one process: the worker and its shard thread
  for (const auto& [n, k, placement, extra] : cases) {
    std::string base = kPsLenet;
    if (extra.find("--bucket-mb") != std::string::npos) {
      base.erase(base.find(" --bucket-mb 0.2"), 16);  // this case sets its own
    }
    const std::string args = base + " --workers " + std::to_string(n) +
                             " --strategy ps --ps-shards " + std::to_string(k) +
                             " --ps-placement " + placement + " " + extra;
    SCOPED_TRACE(args);
    const TrainRun r = train(args);
    ASSERT_FALSE(r.weights.empty());
    EXPECT_LE(closeness(r.weights, ps_lenet_reference(), 1e-5, 1e-7), 1.0);
    expect_ps_record(r.record, n, k, placement);
    EXPECT_EQ(r.record["results"]["ps"]["staleness_max"], 0);  // synchronous: never stale
  }
}

// Under mpirun: the first K ranks serve (dedicated), or the first K workers
// host the shards (colocated).
TEST(PsSync, MatchesOneWorkerUnderMpirun) {
  DLSCALE_SKIP_WITHOUT_MPI();
  for (const auto& [np, extra] : std::vector<std::pair<int, std::string>>{
           {4, "--ps-shards 2 --ps-placement dedicated"},
           {3, "--ps-shards 2 --ps-placement colocated --ps-assign greedy"}}) {
    SCOPED_TRACE(extra);
    const std::string w = temp_path("wps.pt");
    const auto o = run_shell("mpirun --oversubscribe --allow-run-as-root -np " +
                             std::to_string(np) + " " + std::string(DLSCALE_BINARY) + " " +
                             kPsLenet + " --strategy ps " + extra + " --save-weights " + w);
    ASSERT_EQ(o.code, 0) << o.err;
    EXPECT_NE(o.out.find("communication: mpi ps"), std::string::npos) << o.out;
    EXPECT_NE(o.out.find("replicas: identical\n"), std::string::npos) << o.out;
    EXPECT_LE(closeness(load_weights(w), ps_lenet_reference(), 1e-5, 1e-7), 1.0);
  }
}

// One worker: each gradient is applied as it arrives either way, so async
// must give exactly the synchronous result.
TEST(PsAsync, OneWorkerIsExactlySynchronous) {
  const TrainRun r = train(kPsLenet +
                           " --strategy ps --ps-mode async --ps-shards 2 "
                           "--ps-placement dedicated --ps-assign greedy");
  ASSERT_FALSE(r.weights.empty());
  EXPECT_LE(closeness(r.weights, ps_lenet_reference(), 1e-5, 1e-7), 1.0);
  EXPECT_EQ(r.record["results"]["ps"]["staleness_max"], 0);
}

// The median of rank 0's last `count` losses: one step that met a very stale
// gradient can spike (3.5 from 2.3 was seen), and one spike must not decide.
double median_of_last(const nlohmann::json& record, size_t count) {
  const nlohmann::json& loss = record["steps"]["loss"];
  std::vector<double> last;
  for (size_t i = loss.size() - count; i < loss.size(); ++i) last.push_back(loss[i].get<double>());
  std::nth_element(last.begin(), last.begin() + count / 2, last.end());
  return last[count / 2];
}

// Async learns. Plain SGD at lr 0.02 on 2 learnable synthetic batches;
// 3 workers x 20 steps. Async applies 3 updates (batch 4 each) per shard
// for every synchronous one (batch 12), so on the same samples it takes 3x
// the steps. How stale a gradient is depends on the scheduler: about 4
// versions on an idle machine, up to 28 here when workers are paused with
// SIGSTOP for tenths of a second at random. At 12 steps the bounds were
// too close (a CI run's mean of the last 3 losses was 0.87 of the first).
// At 20, the median of the last 5 is 0.42 of the first loss for sync and
// 0.02 to 0.22 for async in 40 runs here with paused workers, on an idle
// machine and beside a compiler or busy loops. So async's loss (median of rank 0's
// last 5 steps) must not exceed sync's by more than 25%, and must have
// fallen by at least a quarter. Every applied gradient's staleness stays
// within --max-staleness; with 0, none is stale.
TEST(PsAsync, LearnsAndKeepsTheStalenessBound) {
  constexpr int kSteps = 20;
  const std::string base =
      "train --model lenet --dropout 0 --threads 1 --steps " + std::to_string(kSteps) +
      " --warmup 1 --optimizer sgd --lr 0.02 "
      "--synthetic-batches 2 --display-every 0 --global-batch 12 --workers 3 --strategy ps "
      "--ps-shards 2 --ps-partition-mb 2 --timeout 30";
  const TrainRun sync = train(base);
  ASSERT_FALSE(sync.record.is_null());
  const double sync_loss = median_of_last(sync.record, 5);
  for (const int bound : {-1, 2, 1, 0}) {
    SCOPED_TRACE("max staleness " + std::to_string(bound));
    const TrainRun r = train(base + " --ps-mode async --max-staleness " + std::to_string(bound));
    ASSERT_FALSE(r.record.is_null());
    const nlohmann::json& ps = r.record["results"]["ps"];
    SCOPED_TRACE("losses " + r.record["steps"]["loss"].dump() + ", staleness histograms " +
                 ps["per_shard"].dump());
    const double first = r.record["steps"]["loss"][0].get<double>();
    EXPECT_LT(median_of_last(r.record, 5), 0.75 * first);
    EXPECT_LE(median_of_last(r.record, 5), 1.25 * sync_loss);
    int64_t applied = 0;
    for (const auto& shard : ps["per_shard"]) {
      EXPECT_EQ(shard["updates"], 3 * kSteps);  // every worker's every gradient, applied
      int64_t in_histogram = 0;
      for (const auto& h : shard["staleness_histogram"]) in_histogram += h.get<int64_t>();
      EXPECT_EQ(in_histogram, 3 * kSteps);
      applied += shard["updates"].get<int64_t>();
      if (bound >= 0) {
        EXPECT_LE(shard["staleness_max"].get<int64_t>(), bound);
      }
    }
    EXPECT_EQ(applied, 2 * 3 * kSteps);
    if (bound == 0) {
      EXPECT_EQ(ps["staleness_mean"], 0.0);
    }
    EXPECT_EQ(r.record["results"]["comm"]["replicas_identical"], true);  // the last pull waits for all
  }
}

TEST(PsErrors, BadInputIsOneLineBeforeAnythingStarts) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--strategy ps --ps-shards 0", "--ps-shards must be >= 1 (got 0)"},
      {"--strategy ps --workers 2 --ps-shards 3",
       "--ps-shards 3 with --ps-placement colocated needs as many workers to host them (got 2)"},
      {"--strategy ps --ps-mode lazy", "unknown --ps-mode 'lazy'; allowed: sync, async"},
      {"--strategy ps --ps-assign random",
       "unknown --ps-assign 'random'; allowed: round-robin, greedy"},
      {"--strategy ps --ps-placement remote",
       "unknown --ps-placement 'remote'; allowed: colocated, dedicated"},
      {"--strategy ps --max-staleness 2",
       "--max-staleness bounds --ps-mode async only (got --ps-mode sync)"},
      {"--strategy ps --ps-mode async --max-staleness -3", "--max-staleness must be >= 0"},
      {"--ps-shards 2", "--ps-* flags and --max-staleness apply to --strategy ps only"},
      {"--strategy ps --compress fp16", "--compress fp16 is not supported with --strategy ps"},
      {"--strategy ps --ps-mode async --sync-buffers step --workers 2",
       "--sync-buffers step broadcasts before every step"},
      {"--strategy ps --ps-shards 9 --ps-placement dedicated",
       "--ps-shards 9 is more than the 8 variables to place"}};
  for (const auto& [flags, message] : cases) {
    SCOPED_TRACE(flags);
    const auto o = run_dlscale("train --model lenet --steps 2 --warmup 1 " + flags);
    EXPECT_EQ(o.code, 2);
    EXPECT_EQ(o.err.rfind("dlscale: error: ", 0), 0u) << o.err;
    EXPECT_NE(o.err.find(message), std::string::npos) << o.err;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
    EXPECT_EQ(o.out.find("step"), std::string::npos);  // nothing started
  }
  // Under mpirun, dedicated servers must leave at least one worker.
  DLSCALE_SKIP_WITHOUT_MPI();
  const auto o =
      run_shell("mpirun --oversubscribe --allow-run-as-root -np 2 " + std::string(DLSCALE_BINARY) +
                " " + kPsLenet + " --strategy ps --ps-shards 2 --ps-placement dedicated");
  EXPECT_NE(o.code, 0);
  EXPECT_NE(o.err.find("--ps-shards 2 dedicated server(s) leave no worker among the job's 2 ranks"),
            std::string::npos)
      << o.err;
}

}  // namespace
}  // namespace dlscale
