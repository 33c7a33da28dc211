#include "data/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "core/error.h"

namespace dlscale::data {
namespace {

SamplerOptions options(int64_t size, int64_t batch, uint64_t seed = 42) {
  SamplerOptions o;
  o.dataset_size = size;
  o.global_batch = batch;
  o.seed = seed;
  return o;
}

// One epoch over all ranks' slices covers every sample exactly once.
TEST(GlobalSampler, AnEpochAcrossRanksCoversEverySampleOnce) {
  for (const int64_t world : {1, 2, 3, 4}) {
    GlobalSampler s(options(48, 12));
    ASSERT_EQ(s.steps_per_epoch(), 4);
    std::multiset<int64_t> seen;
    for (int64_t step = 0; step < 4; ++step) {
      for (int64_t rank = 0; rank < world; ++rank) {
        for (int64_t i : s.indices(step, rank * 12 / world, 12 / world)) seen.insert(i);
      }
    }
    ASSERT_EQ(seen.size(), 48u) << world;
    for (int64_t i = 0; i < 48; ++i) EXPECT_EQ(seen.count(i), 1u) << i;
  }
}

// Rank slices concatenated are the one-worker global batch.
TEST(GlobalSampler, RankSlicesTileTheGlobalBatch) {
  GlobalSampler whole(options(50, 12));
  GlobalSampler parts(options(50, 12));
  for (int64_t step : {0, 3, 4, 9}) {
    std::vector<int64_t> joined;
    for (int64_t rank = 0; rank < 3; ++rank) {
      const auto slice = parts.indices(step, rank * 4, 4);
      joined.insert(joined.end(), slice.begin(), slice.end());
    }
    EXPECT_EQ(joined, whole.indices(step, 0, 12)) << step;
  }
}

TEST(GlobalSampler, SameSeedSameOrderNewOrderEachEpoch) {
  GlobalSampler a(options(40, 8)), b(options(40, 8)), c(options(40, 8, 7));
  EXPECT_EQ(a.indices(0, 0, 8), b.indices(0, 0, 8));
  EXPECT_NE(a.indices(0, 0, 8), c.indices(0, 0, 8));
  // Epoch 1 (steps 5..9) is another permutation than epoch 0.
  std::vector<int64_t> e0, e1;
  for (int64_t s = 0; s < 5; ++s) {
    for (int64_t i : a.indices(s, 0, 8)) e0.push_back(i);
    for (int64_t i : a.indices(s + 5, 0, 8)) e1.push_back(i);
  }
  EXPECT_NE(e0, e1);
  std::sort(e0.begin(), e0.end());
  std::sort(e1.begin(), e1.end());
  EXPECT_EQ(e0, e1);
  EXPECT_EQ(a.epoch_of(4), 0);
  EXPECT_EQ(a.epoch_of(5), 1);
}

TEST(GlobalSampler, UnshuffledIsIndexOrderAndSmallDatasetsAreRefused) {
  SamplerOptions o = options(10, 4);
  o.shuffle = false;
  GlobalSampler s(o);
  EXPECT_EQ(s.indices(1, 1, 3), (std::vector<int64_t>{5, 6, 7}));
  EXPECT_EQ(s.indices(2, 0, 2), (std::vector<int64_t>{0, 1}));  // epoch 1 starts over
  try {
    GlobalSampler tiny(options(5, 8));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "the dataset holds 5 samples, fewer than one global batch of 8");
  }
}

}  // namespace
}  // namespace dlscale::data
