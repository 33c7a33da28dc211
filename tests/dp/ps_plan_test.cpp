// Placement of variables on parameter-server shards (dp/ps_plan.h).
#include "dp/ps_plan.h"

#include <gtest/gtest.h>

#include <numeric>

#include "core/error.h"

namespace dlscale::dp {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

/// Every element of every parameter is in exactly one piece, and each
/// shard's pieces tile its buffer and its buckets.
void expect_consistent(const PsPlan& plan, const std::vector<int64_t>& numels) {
  std::vector<int64_t> covered(numels.size(), 0);
  for (const PsPiece& p : plan.pieces) covered[p.param] += p.length;
  EXPECT_EQ(covered, numels);
  for (const PsShardPlan& s : plan.shards) {
    int64_t offset = 0;
    for (size_t i : s.pieces) {
      EXPECT_EQ(plan.pieces[i].shard_offset, offset);
      offset += plan.pieces[i].length;
    }
    EXPECT_EQ(offset, s.elements);
    int64_t in_buckets = 0;
    for (const PsBucket& b : s.buckets) {
      EXPECT_EQ(b.offset, in_buckets);
      in_buckets += b.length;
    }
    EXPECT_EQ(in_buckets, s.elements);
  }
}

TEST(PsPlan, RoundRobinFollowsRegistrationOrder) {
  const std::vector<int64_t> n = {100, 10, 200, 20, 300};
  const PsPlan plan = plan_ps(n, 2, PsAssign::kRoundRobin, 0, 0, 1);
  ASSERT_EQ(plan.pieces.size(), 5u);
  for (int k = 0; k < 5; ++k) EXPECT_EQ(plan.pieces[k].shard, k % 2);
  EXPECT_EQ(plan.shards[0].elements, 600);
  EXPECT_EQ(plan.shards[1].elements, 30);
  EXPECT_DOUBLE_EQ(plan.imbalance(), 600.0 * 2 / 630);
  // Buffer order is reverse registration order: parameter 4 first on shard 0.
  EXPECT_EQ(plan.pieces[plan.shards[0].pieces.front()].param, 4);
  expect_consistent(plan, n);
}

TEST(PsPlan, GreedyPutsTheLargestFirstOntoTheLeastLoaded) {
  const std::vector<int64_t> n = {100, 10, 200, 20, 300};
  const PsPlan plan = plan_ps(n, 2, PsAssign::kGreedy, 0, 0, 1);
  // 300 -> 0; 200 -> 1; 100 -> 1 (200 < 300); 20 -> 0 (tie 300/300: lower shard); 10 -> 1.
  EXPECT_EQ(plan.pieces[4].shard, 0);
  EXPECT_EQ(plan.pieces[2].shard, 1);
  EXPECT_EQ(plan.pieces[0].shard, 1);
  EXPECT_EQ(plan.pieces[3].shard, 0);
  EXPECT_EQ(plan.pieces[1].shard, 1);
  EXPECT_EQ(plan.shards[0].elements, 320);
  EXPECT_EQ(plan.shards[1].elements, 310);
  expect_consistent(plan, n);
  // Deterministic: the same input plans the same way.
  const PsPlan again = plan_ps(n, 2, PsAssign::kGreedy, 0, 0, 1);
  for (size_t i = 0; i < n.size(); ++i) EXPECT_EQ(again.pieces[i].shard, plan.pieces[i].shard);
}

TEST(PsPlan, PartitionSplitsBigTensorsIntoNearEqualPieces) {
  // One 10 MiB tensor and a small one; 4 MiB pieces -> 3 pieces of the big one.
  const int64_t big = static_cast<int64_t>(10 * kMiB / 4);
  const std::vector<int64_t> n = {big, 1000};
  const PsPlan whole = plan_ps(n, 2, PsAssign::kGreedy, 0, 0, 1);
  EXPECT_GT(whole.imbalance(), 1.99);
  // Without splitting, 3 shards cannot all get one of 2 variables.
  EXPECT_THROW(plan_ps(n, 3, PsAssign::kGreedy, 0, 0, 1), Error);
  const PsPlan split = plan_ps(n, 3, PsAssign::kGreedy, 4, 0, 1);
  ASSERT_EQ(split.pieces_of_param[0].size(), 3u);
  for (size_t i : split.pieces_of_param[0]) {
    EXPECT_NEAR(static_cast<double>(split.pieces[i].length), big / 3.0, 1.0);
  }
  EXPECT_LT(split.imbalance(), 1.01);
  expect_consistent(split, n);
}

TEST(PsPlan, BucketsFollowTheCapsWithinEachShard) {
  // 8 parameters of 0.5 MiB on one shard; first bucket cap 1 MiB, then 2 MiB.
  const std::vector<int64_t> n(8, static_cast<int64_t>(0.5 * kMiB / 4));
  const PsPlan plan = plan_ps(n, 1, PsAssign::kRoundRobin, 0, 2, 1);
  const auto& b = plan.shards[0].buckets;
  ASSERT_EQ(b.size(), 3u);  // 1 MiB, 2 MiB, the last 1 MiB
  EXPECT_EQ(b[0].length * 4, static_cast<int64_t>(1 * kMiB));
  EXPECT_EQ(b[1].length * 4, static_cast<int64_t>(2 * kMiB));
  EXPECT_EQ(b[2].length * 4, static_cast<int64_t>(1 * kMiB));
  expect_consistent(plan, n);
  // bucket_mb 0: one bucket per shard (pushed after backward).
  EXPECT_EQ(plan_ps(n, 1, PsAssign::kRoundRobin, 0, 0, 1).shards[0].buckets.size(), 1u);
}

TEST(PsPlan, BadShardCountsAreErrors) {
  EXPECT_THROW(plan_ps({10, 10}, 0, PsAssign::kRoundRobin, 0, 0, 1), Error);
  EXPECT_THROW(plan_ps({10, 10}, 3, PsAssign::kRoundRobin, 0, 0, 1), Error);
}

}  // namespace
}  // namespace dlscale::dp
