#include "libtorch/data/synthetic.h"

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include "core/error.h"
#include "data/sampler.h"
#include "libtorch/models/model.h"
#include "models/recommendation.h"

namespace dlscale::data {
namespace {

SyntheticOptions small_options() {
  SyntheticOptions o;
  o.global_batch = 8;
  o.pool_batches = 2;
  return o;
}

/// Image classification's samples: 1 channel (lenet's), 12x12, 5 classes.
SampleFn images(uint64_t seed = 42) {
  const models::ModelSpec& spec = models::find_model("lenet");
  models::ModelOptions m;
  m.image_size = 12;
  m.num_classes = 5;
  return spec.task->synthetic(spec, m, seed);
}

torch::Tensor image(const Batch& b) { return b.inputs.at(kImage); }
torch::Tensor label(const Batch& b) { return b.targets.at(kLabel); }

TEST(Synthetic, ShapesAndLabelRange) {
  SyntheticData d(small_options(), images());
  const Batch b = d.batch(0);
  EXPECT_EQ(image(b).sizes(), (std::vector<int64_t>{8, 1, 12, 12}));
  EXPECT_EQ(label(b).sizes(), (std::vector<int64_t>{8}));
  EXPECT_EQ(label(b).scalar_type(), torch::kInt64);
  EXPECT_GE(label(b).min().item<int64_t>(), 0);
  EXPECT_LT(label(b).max().item<int64_t>(), 5);
}

TEST(Synthetic, PoolCyclesAndSeedIsDeterministic) {
  SyntheticData a(small_options(), images());
  SyntheticData b(small_options(), images());
  EXPECT_TRUE(torch::equal(image(a.batch(0)), image(b.batch(0))));
  EXPECT_TRUE(torch::equal(image(a.batch(0)), image(a.batch(2))));
  EXPECT_FALSE(torch::equal(image(a.batch(0)), image(a.batch(1))));
  EXPECT_FALSE(torch::equal(image(SyntheticData(small_options(), images(7)).batch(0)), image(a.batch(0))));
}

// N workers' slices, concatenated in rank order, are exactly the global batch.
TEST(Synthetic, RankSlicesTileTheGlobalBatch) {
  SyntheticData whole(small_options(), images());
  for (int64_t world : {2, 4}) {
    std::vector<torch::Tensor> inputs, labels;
    for (int64_t rank = 0; rank < world; ++rank) {
      auto o = small_options();
      o.rank = rank;
      o.world_size = world;
      SyntheticData part(o, images());
      EXPECT_EQ(part.local_batch(), 8 / world);
      inputs.push_back(image(part.batch(1)));
      labels.push_back(label(part.batch(1)));
    }
    EXPECT_TRUE(torch::equal(torch::cat(inputs), image(whole.batch(1))));
    EXPECT_TRUE(torch::equal(torch::cat(labels), label(whole.batch(1))));
  }
}

// Image classification's samples are its 8x8 class pattern (from the seed),
// upsampled, plus unit Gaussian noise (from the seed and the sample's index),
// labelled by the index's mixed seed: the data dlscale always generated.
TEST(Synthetic, ImagesAreTheClassPatternInNoise) {
  const Batch b = SyntheticData(small_options(), images(42)).batch(1);
  at::Generator pattern_gen = at::detail::createCPUGenerator(42);
  const torch::Tensor patterns = torch::randn({5, 1, 8, 8}, pattern_gen, torch::kFloat32);
  for (int64_t k = 0; k < 8; ++k) {
    const uint64_t seed = mix_seed(42, static_cast<uint64_t>(8 + k));
    const auto want_label = static_cast<int64_t>(seed % 5);
    EXPECT_EQ(label(b)[k].item<int64_t>(), want_label);
    at::Generator gen = at::detail::createCPUGenerator(seed);
    const torch::Tensor noise = torch::randn({1, 12, 12}, gen, torch::kFloat32);
    const torch::Tensor pattern = torch::upsample_nearest2d(patterns.narrow(0, want_label, 1), {12, 12})[0];
    EXPECT_TRUE(torch::equal(image(b)[k], noise + pattern)) << k;
  }
}

// The pool is the training set: an epoch is one pass over it.
TEST(Synthetic, AnEpochIsThePool) { EXPECT_EQ(SyntheticData(small_options(), images()).steps_per_epoch(), 2); }

// The held-out samples: sample j is the task's test sample j (the training
// generator at kSyntheticTestIndex + j); the ranks' contiguous parts, in
// batches with a shorter last one, hold each of them once.
TEST(Synthetic, TestSamplesAreHeldOutAndSplitOverRanks) {
  const models::ModelSpec& spec = models::find_model("lenet");
  models::ModelOptions m;
  m.image_size = 12;
  m.num_classes = 5;
  const SampleFn test = spec.task->synthetic_test(spec, m, 42);
  const SampleFn train = images(42);
  EXPECT_TRUE(torch::equal(test(3).inputs.at(kImage), train(models::kSyntheticTestIndex + 3).inputs.at(kImage)));
  auto four = small_options();
  four.global_batch = 4;
  SyntheticTestData whole(11, four, test);
  EXPECT_EQ(whole.steps_per_epoch(), 3);  // 4 + 4 + 3
  std::vector<torch::Tensor> all;
  for (int64_t b = 0; b < 3; ++b) all.push_back(image(whole.batch(b)));
  EXPECT_EQ(all.back().size(0), 3);
  for (int64_t j = 0; j < 11; ++j) EXPECT_TRUE(torch::equal(torch::cat(all)[j], test(static_cast<uint64_t>(j)).inputs.at(kImage)));
  std::vector<torch::Tensor> parts;
  for (int64_t rank = 0; rank < 2; ++rank) {
    auto o = four;
    o.rank = rank;
    o.world_size = 2;
    SyntheticTestData part(11, o, test);
    for (int64_t b = 0; b < part.steps_per_epoch(); ++b) parts.push_back(image(part.batch(b)));
  }
  EXPECT_TRUE(torch::equal(torch::cat(parts), torch::cat(all)));
}

// ncf's held-out samples are MLPerf's candidate lists: a liked item first,
// then 999 of other groups, for a user of the training stream's.
TEST(Synthetic, RecommendationTestSamplesAreCandidateLists) {
  const models::ModelSpec& spec = models::find_model("ncf");
  const SampleFn test = spec.task->synthetic_test(spec, {}, 9);
  for (uint64_t j = 0; j < 20; ++j) {
    const Sample s = test(j);
    const int64_t user = s.inputs.at(models::kUser).item<int64_t>();
    const torch::Tensor items = s.inputs.at(models::kItem);
    ASSERT_EQ(items.size(0), models::kEvalCandidates);
    EXPECT_LT(user, models::kSyntheticUsers);
    EXPECT_LT(items.max().item<int64_t>(), models::kSyntheticItems);
    const torch::Tensor liked = items.remainder(models::kTasteGroups).eq(user % models::kTasteGroups);
    EXPECT_TRUE(liked[0].item<bool>()) << j;
    EXPECT_EQ(liked.sum().item<int64_t>(), 1) << j;
  }
}

TEST(Synthetic, RejectsIndivisibleBatch) {
  auto o = small_options();
  o.world_size = 3;
  EXPECT_THROW(SyntheticData(o, images()), Error);
}

}  // namespace
}  // namespace dlscale::data
