#include "data/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "core/error.h"
#include "data/dataset.h"

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



/// Rank `rank` of `world` over 5 shards of 10 samples: the dataset it
/// opened holds only its own (shards rank, rank + world, …), as
/// open_dataset's ShardPick gives them.
StreamingOptions streaming(int64_t rank, int64_t world, int64_t buffer = 4) {
  StreamingOptions o;
  for (int64_t k = rank; k < 5; k += world) {
    o.shard_starts.push_back(o.dataset_size);
    o.dataset_size += 10;
  }
  o.local_batch = 4;
  o.rank = rank;
  o.smallest_samples = 50 / world / 10 * 10;  // the agreed smallest part: 5 shards over `world` ranks
  o.smallest_rank = world - 1;
  o.shuffle_buffer = buffer;
  return o;
}

// Each rank reads each of its samples at most once per epoch, and all ranks
// run the smallest part's steps.
TEST(StreamingSampler, EachRankReadsItsSamplesOncePerEpochForTheSmallestPartsSteps) {
  for (const int64_t world : {1, 2, 3}) {
    for (int64_t rank = 0; rank < world; ++rank) {
      const StreamingOptions o = streaming(rank, world);
      StreamingSampler s(o);
      // Ranks of 2 workers hold 30 and 20 samples: 5 steps of 4 for both.
      const int64_t smallest = world == 1 ? 50 : world == 2 ? 20 : 10;
      EXPECT_EQ(s.steps_per_epoch(), smallest / 4) << world;
      std::set<int64_t> seen;
      for (int64_t step = 0; step < s.steps_per_epoch(); ++step) {
        for (int64_t i : s.rank_indices(step)) {
          EXPECT_TRUE(i >= 0 && i < o.dataset_size) << "sample " << i << " is not in rank " << rank << "'s part";
          EXPECT_TRUE(seen.insert(i).second) << "sample " << i << " read twice in one epoch";
        }
      }
      EXPECT_EQ(seen.size(), static_cast<size_t>(s.steps_per_epoch() * 4));
    }
  }
  StreamingOptions alone = streaming(0, 1);
  alone.smallest_samples = 0;  // not agreed: this rank's own 50
  EXPECT_EQ(StreamingSampler(alone).steps_per_epoch(), 12);
}

TEST(StreamingSampler, SeededShuffledPerEpochAndBufferOneIsShardOrder) {
  StreamingSampler a(streaming(0, 1)), b(streaming(0, 1));
  EXPECT_EQ(a.rank_indices(0), b.rank_indices(0));
  EXPECT_NE(a.rank_indices(0), a.rank_indices(12));  // epoch 1 starts at step 12
  StreamingSampler other_rank(streaming(1, 2)), rank0(streaming(0, 2));
  EXPECT_NE(other_rank.rank_indices(0), rank0.rank_indices(0));  // each rank's order is its own
  StreamingSampler ordered(streaming(0, 1, 1));
  const std::vector<int64_t> first = ordered.rank_indices(0);
  EXPECT_EQ(first[1], first[0] + 1);  // within a shard, front to back
  EXPECT_EQ(first[0] % 10, 0);
}

TEST(StreamingSampler, APartSmallerThanOneBatchIsRefusedNamingItsRank) {
  StreamingOptions o = streaming(0, 2);
  o.local_batch = 21;  // rank 1 holds 20
  try {
    StreamingSampler s(o);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "--data-order streaming: worker 1's shards hold 20 samples, fewer than one batch of 21");
  }
  o.local_batch = 20;
  EXPECT_EQ(StreamingSampler(o).steps_per_epoch(), 1);
}

TEST(StreamingSampler, FewerShardsThanWorkersAreRefused) {
  try {
    check_shards_for_parts(5, 6);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "--data-order streaming gives each worker its own shards: 5 shard(s) cannot feed 6 "
                 "workers (pack more shards, or use --data-order global)");
  }
  EXPECT_NO_THROW(check_shards_for_parts(5, 5));
}

}  // namespace
}  // namespace dlscale::data
