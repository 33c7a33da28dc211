// ssd300 and its detection task: the architecture is PyTorch's (parameters
// and multiply-accumulates of bench/peer_models.Ssd300), the default boxes
// and their encoding are MLPerf's, the multibox loss is what docs/models.md
// says (and a mean of per-image losses, so N workers' averaged gradients
// are the global batch's), and the synthetic images hold their objects.
#include "libtorch/models/detection.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "libtorch/models/model.h"

namespace dlscale::models {
namespace {

ModelOptions with_classes(int64_t classes) {
  ModelOptions o;
  o.num_classes = classes;
  return resolve_options(find_model("ssd300"), o);
}

TEST(Ssd300, ParametersAndMacsArePyTorchs) {
  const ModelSpec& spec = find_model("ssd300");
  // bench/torchvision_reference.py: peer_models.Ssd300(81) and (5).
  const ModelFacts coco = describe_model(spec, {});
  EXPECT_EQ(coco.parameters, 19972534);
  EXPECT_EQ(coco.macs_per_sample, 15862078720);
  EXPECT_EQ(coco.num_classes, 81);
  EXPECT_EQ(coco.image_size, 300);
  EXPECT_EQ(coco.family, "detection");
  EXPECT_EQ(coco.unit.name, "images");
  const ModelFacts five = describe_model(spec, with_classes(5));
  EXPECT_EQ(five.parameters, 12615886);
  EXPECT_EQ(five.macs_per_sample, 13848732928);
  // The backbone's 3 + 4 + 6 residual blocks are its units.
  EXPECT_EQ(unit_parameters(*make_model(spec, with_classes(5))).size(), 13u);
}

TEST(Ssd300, OutputsOffsetsAndScoresPerDefaultBox) {
  const ModelOptions o = with_classes(5);
  const auto model = make_model(find_model("ssd300"), o);
  model->eval();
  torch::NoGradGuard no_grad;
  const Output out = model->forward({{data::kImage, torch::zeros({2, 3, 300, 300})}});
  EXPECT_EQ(out.main.sizes(), (std::vector<int64_t>{2, 4 + 5, kSsdDefaultBoxes}));
}

TEST(Ssd300, RefusesWhatItCannotBe) {
  const auto message = [](ModelOptions o) {
    try {
      resolve_options(find_model("ssd300"), o);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  ModelOptions size;
  size.image_size = 512;
  EXPECT_EQ(message(size),
            "--image-size does not apply to model 'ssd300' (family detection); it takes --classes "
            "and --dropout");
  ModelOptions one;
  one.num_classes = 1;
  EXPECT_EQ(message(one),
            "--classes must be >= 2 for model 'ssd300' (the background and a class) (got 1)");
}

// MLPerf's dboxes300_coco: per map (38, 19, 10, 5, 3, 1) the box shapes of
// scales 21..315 and ratios 2 (and 3), centred on each position, clamped.
TEST(Ssd300, DefaultBoxesAreMlperfs) {
  const torch::Tensor& d = ssd_default_boxes();
  ASSERT_EQ(d.sizes(), (std::vector<int64_t>{8732, 4}));
  const auto near = [](const torch::Tensor& t, std::vector<double> want) {
    for (size_t k = 0; k < want.size(); ++k) EXPECT_NEAR(t[k].item<double>(), want[k], 1e-6) << k;
  };
  near(d[0], {0.5 / 37.5, 0.5 / 37.5, 0.07, 0.07});  // map 1, first shape, top left
  near(d[1], {1.5 / 37.5, 0.5 / 37.5, 0.07, 0.07});  // its right neighbour
  near(d[1444],
       {0.5 / 37.5, 0.5 / 37.5, std::sqrt(0.07 * 0.15), std::sqrt(0.07 * 0.15)});  // second shape
  near(d[8731], {0.5, 0.5, 0.87 / std::sqrt(2.0), 1.0});  // map 6, ratio 1/2, h clamped
  EXPECT_GE(d.min().item<double>(), 0.0);
  EXPECT_LE(d.max().item<double>(), 1.0);
}

TEST(Ssd300, EncodingMatchesObjectsAndDecodesBackToThem) {
  // A large object and a tiny one (IoU with every default box < 0.5).
  const torch::Tensor ltrb =
      torch::tensor({0.2F, 0.3F, 0.7F, 0.9F, 0.01F, 0.01F, 0.03F, 0.02F}).view({2, 4});
  const torch::Tensor classes = torch::tensor({3, 1}, torch::kInt64);
  const auto [offsets, labels] = ssd_encode(ltrb, classes);
  ASSERT_EQ(offsets.sizes(), (std::vector<int64_t>{8732, 4}));
  EXPECT_GT(labels.eq(3).sum().item<int64_t>(), 5);
  EXPECT_EQ(labels.eq(1).sum().item<int64_t>(), 1) << "the tiny object keeps its best box alone";
  EXPECT_EQ((labels.gt(0) | labels.eq(0)).all().item<bool>(), true);
  EXPECT_EQ(offsets.index({labels.eq(0)}).abs().max().item<double>(), 0.0);
  const torch::Tensor decoded = ssd_decode(offsets);
  for (int64_t k = 0; k < 2; ++k) {
    const torch::Tensor mine = decoded.index({labels.eq(classes[k])});
    const torch::Tensor box = ltrb[k];
    const torch::Tensor want = torch::stack(
        {(box[0] + box[2]) / 2, (box[1] + box[3]) / 2, box[2] - box[0], box[3] - box[1]});
    EXPECT_LT((mine - want).abs().max().item<double>(), 1e-5);
  }
}

/// A batch of `n` synthetic images' targets at 5 classes.
TensorMap targets_of(int64_t n) {
  const ModelSpec& spec = find_model("ssd300");
  const data::SampleFn sample = spec.task->synthetic(spec, with_classes(5), 3);
  std::vector<torch::Tensor> boxes, labels;
  for (int64_t i = 0; i < n; ++i) {
    data::Sample s = sample(i);
    boxes.push_back(s.targets.at(kBoxOffsets));
    labels.push_back(s.targets.at(kBoxLabels));
  }
  return {{kBoxOffsets, torch::stack(boxes)}, {kBoxLabels, torch::stack(labels)}};
}

// With every output 0, each box's cross-entropy is log(classes) and the
// offsets' loss is smooth L1 of the truth: per image (Σ matched smooth L1 +
// (P + 3P) log C) / P, averaged over the batch.
TEST(Ssd300, MultiboxLossMinesThreeNegativesPerMatchedBox) {
  const TensorMap t = targets_of(3);
  const Task& task = *find_model("ssd300").task;
  const torch::Tensor zeros = torch::zeros({3, 4 + 5, kSsdDefaultBoxes});
  double want = 0;
  for (int64_t i = 0; i < 3; ++i) {
    const torch::Tensor pos = t.at(kBoxLabels)[i].gt(0);
    const double p = static_cast<double>(pos.sum().item<int64_t>());
    const torch::Tensor a = t.at(kBoxOffsets)[i].index({pos}).abs();
    const double sl1 = torch::where(a.lt(1), 0.5 * a * a, a - 0.5).sum().item<double>();
    want += (sl1 + 4 * p * std::log(5.0)) / p / 3;
  }
  EXPECT_NEAR(task.loss({zeros, {}}, t, {}).item<double>(), want, 1e-4 * want);
}

// The loss of a batch is the mean of its images' losses, so the average of
// N workers' gradients on their shards is the global batch's.
TEST(Ssd300, LossOfABatchIsTheMeanOfItsShards) {
  const TensorMap t = targets_of(6);
  const Task& task = *find_model("ssd300").task;
  torch::manual_seed(1);
  const torch::Tensor out = torch::randn({6, 4 + 5, kSsdDefaultBoxes});
  const auto shard = [&](int64_t from, int64_t n) {
    TensorMap s;
    for (const auto& [name, v] : t) s[name] = v.narrow(0, from, n);
    return task.loss({out.narrow(0, from, n), {}}, s, {}).item<double>();
  };
  const double whole = task.loss({out, {}}, t, {}).item<double>();
  EXPECT_NEAR(whole, (shard(0, 2) + shard(2, 2) + shard(4, 2)) / 3, 1e-5 * whole);
  EXPECT_NEAR(whole, (shard(0, 3) + shard(3, 3)) / 2, 1e-5 * whole);
}

// Perfect outputs (the truth's offsets, a large score on the truth's class)
// score 1 on both metrics; all-zero offsets and scores do not.
TEST(Ssd300, MetricsScoreMatchedBoxes) {
  const TensorMap t = targets_of(4);
  const Task& task = *find_model("ssd300").task;
  const torch::Tensor scores =
      torch::one_hot(t.at(kBoxLabels), 5).to(torch::kFloat32).transpose(1, 2) * 10;
  const torch::Tensor perfect = torch::cat({t.at(kBoxOffsets).transpose(1, 2), scores}, 1);
  const std::vector<double> best = task.evaluate({perfect, {}}, t);
  ASSERT_EQ(best.size(), 2u);
  EXPECT_NEAR(best[0], 4.0, 1e-9);
  EXPECT_NEAR(best[1], 4.0, 1e-4);
  const std::vector<double> none = task.evaluate({torch::zeros_like(perfect), {}}, t);
  EXPECT_EQ(none[0], 0.0);  // argmax of equal scores is the background
  EXPECT_LT(none[1], 4.0 * 0.95);
  EXPECT_GT(none[1], 4.0 * 0.5);  // default boxes matched at IoU > 0.5
}

// Each image holds 1 to 3 objects painted in their class's colour; the same
// index gives the same image.
TEST(Ssd300, SyntheticImagesHoldTheirObjects) {
  const ModelSpec& spec = find_model("ssd300");
  const data::SampleFn sample = spec.task->synthetic(spec, with_classes(5), 9);
  for (uint64_t i = 0; i < 6; ++i) {
    const data::Sample s = sample(i);
    EXPECT_TRUE(s.inputs.at(data::kImage).equal(sample(i).inputs.at(data::kImage)));
    const torch::Tensor labels = s.targets.at(kBoxLabels);
    const torch::Tensor present = std::get<0>(at::_unique(labels.index({labels.gt(0)})));
    EXPECT_GE(present.numel(), 1);
    EXPECT_LE(present.numel(), 3);
    EXPECT_GE(labels.min().item<int64_t>(), 0);
    EXPECT_LT(labels.max().item<int64_t>(), 5);
    // A matched box's decoded centre lies in a patch of uniform colour.
    const int64_t box = labels.gt(0).nonzero()[0][0].item<int64_t>();
    const torch::Tensor c = ssd_decode(s.targets.at(kBoxOffsets))[box];
    const int64_t x = static_cast<int64_t>(c[0].item<double>() * 300),
                  y = static_cast<int64_t>(c[1].item<double>() * 300);
    const torch::Tensor patch = s.inputs.at(data::kImage).narrow(1, y - 1, 3).narrow(2, x - 1, 3);
    EXPECT_LT((patch - patch.select(1, 0).select(1, 0).view({3, 1, 1})).abs().max().item<double>(),
              1e-6)
        << i;
  }
}

}  // namespace
}  // namespace dlscale::models
