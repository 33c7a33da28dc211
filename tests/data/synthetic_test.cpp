#include "data/synthetic.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace dlscale::data {
namespace {

SyntheticOptions small_options() {
  SyntheticOptions o;
  o.global_batch = 8;
  o.channels = 1;
  o.image_size = 12;
  o.num_classes = 5;
  o.pool_batches = 2;
  return o;
}

TEST(Synthetic, ShapesAndLabelRange) {
  SyntheticData d(small_options());
  const Batch b = d.batch(0);
  EXPECT_EQ(b.inputs.sizes(), (std::vector<int64_t>{8, 1, 12, 12}));
  EXPECT_EQ(b.labels.sizes(), (std::vector<int64_t>{8}));
  EXPECT_EQ(b.labels.scalar_type(), torch::kInt64);
  EXPECT_GE(b.labels.min().item<int64_t>(), 0);
  EXPECT_LT(b.labels.max().item<int64_t>(), 5);
}

TEST(Synthetic, PoolCyclesAndSeedIsDeterministic) {
  SyntheticData a(small_options());
  SyntheticData b(small_options());
  EXPECT_TRUE(torch::equal(a.batch(0).inputs, b.batch(0).inputs));
  EXPECT_TRUE(torch::equal(a.batch(0).inputs, a.batch(2).inputs));
  EXPECT_FALSE(torch::equal(a.batch(0).inputs, a.batch(1).inputs));
  auto other = small_options();
  other.seed = 7;
  EXPECT_FALSE(torch::equal(SyntheticData(other).batch(0).inputs, a.batch(0).inputs));
}

// N workers' slices, concatenated in rank order, are exactly the global batch.
TEST(Synthetic, RankSlicesTileTheGlobalBatch) {
  SyntheticData whole(small_options());
  for (int64_t world : {2, 4}) {
    std::vector<torch::Tensor> inputs, labels;
    for (int64_t rank = 0; rank < world; ++rank) {
      auto o = small_options();
      o.rank = rank;
      o.world_size = world;
      SyntheticData part(o);
      EXPECT_EQ(part.local_batch(), 8 / world);
      inputs.push_back(part.batch(1).inputs);
      labels.push_back(part.batch(1).labels);
    }
    EXPECT_TRUE(torch::equal(torch::cat(inputs), whole.batch(1).inputs));
    EXPECT_TRUE(torch::equal(torch::cat(labels), whole.batch(1).labels));
  }
}

TEST(Synthetic, RejectsIndivisibleBatch) {
  auto o = small_options();
  o.world_size = 3;
  EXPECT_THROW(SyntheticData{o}, Error);
}

}  // namespace
}  // namespace dlscale::data
