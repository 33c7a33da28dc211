// The learning-rate recipe (exact values of every schedule with warm-up and
// linear scaling), LARS against its formula, and distributed evaluation
// counting exactly what one process counts.
#include "train/recipe.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <mutex>

#include "comm/comm_test_util.h"
#include "core/error.h"
#include "data/data_util.h"
#include "libtorch/data/data_spec.h"
#include "libtorch/models/model.h"
#include "libtorch/train/checkpoint.h"
#include "libtorch/train/evaluator.h"
#include "libtorch/train/lars.h"
#include "libtorch/train/optimizer.h"

namespace dlscale::train {
namespace {

// --lr 0.1 at global batch 512 with --base-batch 256 and linear scaling:
// peak 0.2. 10 steps per epoch, 100 steps, one warm-up epoch from 0.
RecipeOptions scaled_recipe(const std::string& schedule) {
  RecipeOptions r;
  r.lr_scaling = LrScaling::kLinear;
  r.base_batch = 256;
  r.warmup_epochs = 1;
  r.lr_schedule = enum_names(LrScheduleKind{}).parse(schedule);
  return r;
}

LrSchedule schedule_of(const RecipeOptions& r) { return LrSchedule(r, 0.1, 512, 10, 100); }

OptimizerOptions with_kind(OptimizerOptions o, OptimizerKind kind) {
  o.kind = kind;
  return o;
}

TEST(LrSchedule, ConstantWithLinearScalingAndWarmup) {
  const LrSchedule s = schedule_of(scaled_recipe("constant"));
  EXPECT_DOUBLE_EQ(s.peak(), 0.2);
  EXPECT_EQ(s.warmup_steps(), 10);
  EXPECT_DOUBLE_EQ(s.at(0), 0.02);  // (0 + 1) / 10 of the peak
  EXPECT_DOUBLE_EQ(s.at(4), 0.1);
  EXPECT_DOUBLE_EQ(s.at(9), 0.2);
  EXPECT_DOUBLE_EQ(s.at(50), 0.2);
  RecipeOptions from_half = scaled_recipe("constant");
  from_half.warmup_start_factor = 0.5;
  EXPECT_DOUBLE_EQ(schedule_of(from_half).at(0), 0.2 * (0.5 + 0.5 * 0.1));
  RecipeOptions unscaled = scaled_recipe("constant");
  unscaled.lr_scaling = LrScaling::kNone;
  EXPECT_DOUBLE_EQ(schedule_of(unscaled).at(50), 0.1);
  RecipeOptions square_root = scaled_recipe("constant");
  square_root.lr_scaling = LrScaling::kSqrt;  // twice the base batch: sqrt(2) times the rate
  EXPECT_DOUBLE_EQ(schedule_of(square_root).at(50), 0.1 * std::sqrt(2.0));
}

TEST(LrSchedule, NoiseScalingFollowsTheOptimalSgdRate) {
  // Bn = 256 at base 256: the rate at B is 0.1 x 2 / (1 + 256 / B), so
  // 512 gives 0.1 x 2 / 1.5, 64 gives 0.1 x 2 / 5 (near linear: 0.025),
  // and a huge batch levels off at 0.1 x 2.
  RecipeOptions r = scaled_recipe("constant");
  r.lr_scaling = LrScaling::kNoise;
  r.lr_noise_scale = 256;
  EXPECT_DOUBLE_EQ(schedule_of(r).at(50), 0.1 * 2 / 1.5);
  EXPECT_DOUBLE_EQ(LrSchedule(r, 0.1, 64, 10, 100).at(50), 0.1 * 2 / 5);
  EXPECT_DOUBLE_EQ(LrSchedule(r, 0.1, 256, 10, 100).at(50), 0.1);
  EXPECT_NEAR(LrSchedule(r, 0.1, 1 << 30, 10, 100).at(50), 0.2, 1e-6);
  EXPECT_DOUBLE_EQ(schedule_of(r).at(4), 0.1 * 2 / 1.5 * 0.5);  // warm-up as before
  EXPECT_NO_THROW(check_recipe(r));
}

TEST(LrSchedule, StepMultipliesByGammaAtEachMilestone) {
  RecipeOptions r = scaled_recipe("step");
  r.lr_milestones = {3, 6};  // steps 30 and 60
  const LrSchedule s = schedule_of(r);
  EXPECT_DOUBLE_EQ(s.at(0), 0.02);
  EXPECT_DOUBLE_EQ(s.at(29), 0.2);
  EXPECT_DOUBLE_EQ(s.at(30), 0.2 * 0.1);
  EXPECT_DOUBLE_EQ(s.at(59), 0.2 * 0.1);
  EXPECT_DOUBLE_EQ(s.at(60), 0.2 * 0.1 * 0.1);
  EXPECT_DOUBLE_EQ(s.at(99), 0.2 * 0.1 * 0.1);
}

TEST(LrSchedule, PolyAndCosineDecayOverTheStepsAfterWarmup) {
  RecipeOptions r = scaled_recipe("poly");
  const LrSchedule poly = schedule_of(r);
  EXPECT_DOUBLE_EQ(poly.at(10), 0.2);
  EXPECT_DOUBLE_EQ(poly.at(55), 0.2 * 0.25);  // t = 45 / 90, (1 - t)^2
  EXPECT_NEAR(poly.at(99), 0.2 * std::pow(1.0 / 90.0, 2), 1e-15);
  r.lr_end_factor = 0.1;
  r.lr_power = 1;
  EXPECT_DOUBLE_EQ(schedule_of(r).at(55), 0.2 * (0.1 + 0.9 * 0.5));
  const LrSchedule cosine = schedule_of(scaled_recipe("cosine"));
  EXPECT_DOUBLE_EQ(cosine.at(5), 0.2 * 0.6);  // still warming up
  EXPECT_DOUBLE_EQ(cosine.at(10), 0.2);
  EXPECT_NEAR(cosine.at(55), 0.1, 1e-15);
  EXPECT_NEAR(cosine.at(100), 0.0, 1e-15);
}

TEST(LrSchedule, OneCycleFollowsPyTorchsOneCycleLR) {
  RecipeOptions r = scaled_recipe("onecycle");
  r.warmup_epochs = 0;
  const LrSchedule s = schedule_of(r);  // 100 steps, rising over 30
  EXPECT_DOUBLE_EQ(s.at(0), 0.2 / 25);
  EXPECT_DOUBLE_EQ(s.at(29), 0.2);
  EXPECT_NEAR(s.at(64), (0.2 + 0.2 / 25 / 1e4) / 2, 1e-15);  // halfway down
  EXPECT_NEAR(s.at(99), 0.2 / 25 / 1e4, 1e-15);
  // What Debian's PyTorch 1.13 gives for OneCycleLR(max_lr=0.2,
  // total_steps=100, cycle_momentum=False) at steps 0, 10, 29, 64, 99.
  EXPECT_NEAR(s.at(0), 0.008000000000000007, 1e-15);
  EXPECT_NEAR(s.at(10), 0.059032789692820165, 1e-15);
  EXPECT_NEAR(s.at(64), 0.1000004, 1e-15);
  EXPECT_NEAR(s.at(99), 8e-07, 1e-15);
}

TEST(LrSchedule, SamplesForACheckpointCoverTheRestOfTheRun) {
  const LrSchedule s = schedule_of(scaled_recipe("cosine"));  // steps 0..99
  const auto from10 = s.samples_from(10);
  ASSERT_EQ(from10.size(), 64u);
  for (int64_t i = 0; i < 8; ++i) EXPECT_EQ(from10[i].first, 10 + i);  // the steps right after
  EXPECT_EQ(from10.back().first, 99);                                   // up to the last
  for (size_t i = 0; i < from10.size(); ++i) {
    if (i > 0) {
      EXPECT_LT(from10[i - 1].first, from10[i].first);
    }
    EXPECT_EQ(from10[i].second, s.at(from10[i].first));
  }
  const auto from95 = s.samples_from(95);
  ASSERT_EQ(from95.size(), 5u);
  EXPECT_EQ(from95.front().first, 95);
  EXPECT_EQ(from95.back().first, 99);
  EXPECT_TRUE(s.samples_from(100).empty());  // a finished run
  EXPECT_TRUE(s.depends_on_length());
  EXPECT_FALSE(schedule_of(scaled_recipe("step")).depends_on_length());
}

TEST(Checkpoint, StepInTheFileNameKeepsOneFilePerCheckpoint) {
  EXPECT_EQ(checkpoint_file("run/ckpt.bin", 40), "run/ckpt.bin");
  EXPECT_EQ(checkpoint_file("run/ckpt-{step}.bin", 40), "run/ckpt-40.bin");
  EXPECT_EQ(checkpoint_file("{step}-{step}", 7), "7-7");
  EXPECT_EQ(checkpoint_file("a{stepb}{step", 7), "a{stepb}{step");
}

TEST(Recipe, BadCombinationsAreRefusedInOneLine) {
  RecipeOptions r;
  r.lr_milestones = {3};
  EXPECT_THROW(check_recipe(r), Error);  // milestones without step
  r = scaled_recipe("onecycle");
  EXPECT_THROW(check_recipe(r), Error);  // warm-up with onecycle
  r = RecipeOptions{};
  r.lr_schedule = LrScheduleKind::kStep;
  EXPECT_THROW(check_recipe(r), Error);  // step without milestones
  r.lr_milestones = {6, 3};
  EXPECT_THROW(check_recipe(r), Error);  // not increasing
  r = RecipeOptions{};
  r.checkpoint_every = 5;
  EXPECT_THROW(check_recipe(r), Error);  // no --checkpoint FILE
  r = RecipeOptions{};
  r.lr_scaling = LrScaling::kNoise;
  EXPECT_THROW(check_recipe(r), Error);  // noise without --lr-noise-scale
  for (double bad : {-1.0, std::nan(""), std::numeric_limits<double>::infinity(), 2e9}) {
    r.lr_noise_scale = bad;
    EXPECT_THROW(check_recipe(r), Error) << bad;
  }
  r.lr_scaling = LrScaling::kLinear;
  r.lr_noise_scale = 100;
  EXPECT_THROW(check_recipe(r), Error);  // a noise scale the rule ignores
  EXPECT_DOUBLE_EQ(target_fraction(90), 0.9);
  EXPECT_DOUBLE_EQ(target_fraction(0.9), 0.9);
}

TEST(Lars, MatchesTheFormulaOnAHandComputedExample) {
  // w = [3, 4] (‖w‖ = 5), g = [0.6, 0.8] (‖g‖ = 1), λ = 0.01, η = 0.001, lr 1:
  // trust = 0.001·5 / (1 + 0.01·5) = 0.005 / 1.05; update = g + λw = [0.63, 0.84];
  // v = trust·update = [0.003, 0.004]; w ← [2.997, 3.996].
  torch::Tensor w = torch::tensor({{3.0, 4.0}}, torch::kFloat64).requires_grad_();
  torch::Tensor b = torch::tensor({1.0}, torch::kFloat64).requires_grad_();
  TrainOptions o;
  o.optimizer.lr = 1.0;
  o.optimizer.momentum = 0.9;
  o.optimizer.weight_decay = 0.01;
  o.recipe.lars_eta = 0.001;
  auto lars = make_optimizer(with_kind(o.optimizer, OptimizerKind::kLars), {w, b}, o.recipe);  // wd-exclude auto: b is excluded
  w.mutable_grad() = torch::tensor({{0.6, 0.8}}, torch::kFloat64);
  b.mutable_grad() = torch::tensor({0.5}, torch::kFloat64);
  lars->step();
  EXPECT_NEAR(w[0][0].item<double>(), 2.997, 1e-12);
  EXPECT_NEAR(w[0][1].item<double>(), 3.996, 1e-12);
  EXPECT_DOUBLE_EQ(b[0].item<double>(), 0.5);  // plain momentum, no decay, no trust ratio
  // Second step, same gradient: v ← 0.9·v + trust'·(g + λw').
  const double norm = std::hypot(2.997, 3.996);
  const double trust = 0.001 * norm / (1.0 + 0.01 * norm);
  lars->step();
  EXPECT_NEAR(w[0][0].item<double>(), 2.997 - (0.9 * 0.003 + trust * (0.6 + 0.01 * 2.997)), 1e-12);
  EXPECT_NEAR(w[0][1].item<double>(), 3.996 - (0.9 * 0.004 + trust * (0.8 + 0.01 * 3.996)), 1e-12);
  EXPECT_DOUBLE_EQ(b[0].item<double>(), 0.5 - (0.9 * 0.5 + 0.5));
  // A schedule sets every group's rate.
  set_learning_rate(*lars, 0.25);
  for (const auto& g : lars->param_groups()) EXPECT_DOUBLE_EQ(g.options().get_lr(), 0.25);
}

TEST(Lars, EachTensorGetsItsOwnTrustRatio) {
  // Three matrices in one group: the second has no gradient this step (left
  // alone), the third is all zeros (‖w‖ = 0: trust 1). First step, λ = 0:
  // w ← w − lr·trust·g.
  torch::Tensor a = torch::tensor({{3.0, 4.0}}, torch::kFloat64).requires_grad_();
  torch::Tensor b = torch::tensor({{1.0, 1.0}}, torch::kFloat64).requires_grad_();
  torch::Tensor z = torch::zeros({1, 2}, torch::kFloat64).requires_grad_();
  TrainOptions o;
  o.optimizer.lr = 0.5;
  o.recipe.lars_eta = 0.01;
  auto lars = make_optimizer(with_kind(o.optimizer, OptimizerKind::kLars), {a, b, z}, o.recipe);
  a.mutable_grad() = torch::tensor({{0.0, 2.0}}, torch::kFloat64);  // ‖g‖ = 2: trust 0.01·5/2
  z.mutable_grad() = torch::tensor({{1.0, -1.0}}, torch::kFloat64);
  lars->step();
  EXPECT_NEAR(a[0][1].item<double>(), 4.0 - 0.5 * 0.025 * 2.0, 1e-15);
  EXPECT_DOUBLE_EQ(a[0][0].item<double>(), 3.0);
  EXPECT_DOUBLE_EQ(b[0][0].item<double>(), 1.0);
  EXPECT_DOUBLE_EQ(z[0][0].item<double>(), -0.5);
  EXPECT_DOUBLE_EQ(z[0][1].item<double>(), 0.5);
}

TEST(Optimizer, WeightDecayExclusionPutsOneDimensionalTensorsInTheirOwnGroup) {
  torch::Tensor w = torch::ones({2, 2}, torch::kFloat64).requires_grad_();
  torch::Tensor b = torch::ones({2}, torch::kFloat64).requires_grad_();
  TrainOptions o;
  o.optimizer.lr = 0.5;
  o.optimizer.weight_decay = 0.1;
  o.recipe.wd_exclude = DecayExclusion::kBiasNorm;
  auto sgd = make_optimizer(with_kind(o.optimizer, OptimizerKind::kSgd), {w, b}, o.recipe);
  ASSERT_EQ(sgd->param_groups().size(), 2u);
  w.mutable_grad() = torch::zeros_like(w);
  b.mutable_grad() = torch::zeros_like(b);
  sgd->step();
  EXPECT_DOUBLE_EQ(w[0][0].item<double>(), 1.0 - 0.5 * 0.1);  // decayed
  EXPECT_DOUBLE_EQ(b[0].item<double>(), 1.0);                  // not decayed
}

TEST(Evaluation, CountsTopOneAndTopFive) {
  // Three samples, six classes: label ranked 1st, 3rd and 6th.
  const torch::Tensor logits = torch::tensor(
      {{9.0, 1.0, 2.0, 3.0, 4.0, 5.0}, {1.0, 9.0, 8.0, 7.0, 2.0, 3.0}, {6.0, 5.0, 4.0, 3.0, 2.0, 1.0}});
  const auto task = models::image_classification();
  const std::vector<double> sums =
      task->evaluate({logits, {}}, {{data::kLabel, torch::tensor({0, 3, 5}, torch::kInt64)}});
  ASSERT_EQ(task->metrics().size(), 2u);
  EXPECT_EQ(task->metrics()[0].name, "top1");
  EXPECT_EQ(task->metrics()[1].name, "top5");
  EXPECT_EQ(sums, (std::vector<double>{1, 2}));
}

TEST(Evaluation, DistributedCountsEqualOneProcessExactly) {
  // 37 test samples split over 1, 2 and 3 ranks (uneven parts, short last
  // batches); the same model on every rank.
  const std::string dir = testing::write_idx_dataset(24, 37, 28, false);
  data::DataOptions d;
  d.spec = "idx:" + dir;
  const data::OpenedData test = data::open_data(d, 1, data::Split::kTest);
  std::mutex init;  // ranks are threads sharing one generator: one seeded build at a time
  auto make = [&init] {
    std::lock_guard<std::mutex> lock(init);
    torch::manual_seed(3);
    const models::ModelSpec& spec = models::find_model("tinycnn");
    return spec.make(models::resolve_options(spec, {}));
  };
  auto counts_with = [&](int world) {
    std::vector<EvalSums> per_rank(world);
    comm::testing::run_ranks("inproc", world, [&](comm::Communicator& comm) {
      data::SourceOptions so;
      so.global_batch = 5 * world;  // 5 per rank: every part ends in a short batch
      so.rank = comm.rank();
      so.world_size = world;
      so.channels = 1;
      so.image_size = 28;
      so.num_classes = 10;
      Evaluator evaluator(test, d, so, models::image_classification());
      auto model = make();
      per_rank[comm.rank()] = evaluator.run(*model, &comm);
      per_rank[comm.rank()] = evaluator.run(*model, &comm);  // a second pass counts the same
    });
    for (const auto& c : per_rank) {
      EXPECT_EQ(c.sums, per_rank[0].sums);
    }
    return per_rank[0];
  };
  const EvalSums one = counts_with(1);
  EXPECT_EQ(one.samples, 37);
  ASSERT_EQ(one.sums.size(), 2u);
  EXPECT_GT(one.sums[1], one.sums[0]);  // top-5 hits more than top-1
  for (int world : {2, 3}) {
    const EvalSums many = counts_with(world);
    EXPECT_EQ(many.samples, 37) << world;
    EXPECT_EQ(many.sums, one.sums) << world;
  }
}

}  // namespace
}  // namespace dlscale::train
