// Mask R-CNN in the zoo (libtorch/models/maskrcnn.h): its spec and weights, its
// per-image losses (what lets N workers match one worker), an image without
// objects, the evaluation's shares, the FLOP count and the options it
// refuses. The parts and losses against torchvision: maskrcnn_parts_test.cpp.
#include "libtorch/models/maskrcnn.h"

#include <gtest/gtest.h>

#include <regex>
#include <sstream>

#include "core/log.h"
#include "libtorch/models/maskrcnn_net.h"
#include "libtorch/models/model.h"
#include "process_util.h"

namespace dlscale::models {
namespace {

ModelOptions small_options(int64_t rois = 32, int64_t backbone_batch = 0) {
  ModelOptions o;
  o.name = "maskrcnn";
  o.image_size = 64;
  o.num_classes = 5;
  o.rois = rois;
  o.backbone_batch = backbone_batch;
  return resolve_options(find_model("maskrcnn"), o);
}

/// Synthetic samples `first` .. `first + n - 1` as one batch.
TensorMap batch_of(const ModelOptions& o, uint64_t first, int64_t n) {
  const ModelSpec& spec = find_model("maskrcnn");
  const data::SampleFn sample = spec.task->synthetic(spec, o, 11);
  std::map<std::string, std::vector<torch::Tensor>> parts;
  for (int64_t i = 0; i < n; ++i) {
    for (const auto& [name, t] : sample(first + static_cast<uint64_t>(i)).inputs)
      parts[name].push_back(t);
  }
  TensorMap batch;
  for (const auto& [name, list] : parts) batch[name] = torch::stack(list);
  return batch;
}

TEST(MaskRcnn, InTheZooWithTorchvisionsWeights) {
  const ModelSpec& spec = find_model("maskrcnn");
  EXPECT_EQ(spec.family, "detection");
  EXPECT_EQ(spec.task->name(), "instance-segmentation");
  ModelOptions named;
  named.name = "maskrcnn";
  const ModelOptions o = resolve_options(spec, named);
  EXPECT_EQ(o.image_size, 800);
  EXPECT_EQ(o.num_classes, 81);
  EXPECT_EQ(o.rois, 512);
  const std::vector<TensorSpec> inputs = spec.task->inputs(spec, o);
  ASSERT_EQ(inputs.size(), 4u);
  EXPECT_EQ(inputs[0].shape, (std::vector<int64_t>{3, 800, 1333}));
  const std::shared_ptr<Model> model = make_model(spec, o);
  EXPECT_EQ(count_parameters(*model), 44125173);
  EXPECT_EQ(count_parameters(*model) + frozen_weight_count(*model), 44400693);
}

// --backbone-batch 1: each image's pyramid and proposals alone.
TEST(MaskRcnn, ABatchsLossesAreEachImagesAlone) {
  torch::manual_seed(5);
  const ModelOptions o = small_options(32, 1);
  const std::shared_ptr<Model> model = make_model(find_model("maskrcnn"), o);
  model->train();
  const TensorMap batch = batch_of(o, 0, 3);
  const torch::Tensor together = model->forward(batch).main;
  ASSERT_EQ(together.sizes(), (std::vector<int64_t>{3, 5}));
  EXPECT_TRUE(together.isfinite().all().item<bool>());
  EXPECT_TRUE(together.gt(0).all().item<bool>()) << together;
  for (int64_t i = 0; i < 3; ++i) {
    const torch::Tensor alone = model->forward(batch_of(o, static_cast<uint64_t>(i), 1)).main;
    EXPECT_TRUE(torch::allclose(alone[0], together[i].detach(), 1e-4, 1e-6))
        << "image " << i << ": " << alone << " in the batch: " << together[i];
  }
  const torch::Tensor loss = find_model("maskrcnn").task->loss({together, {}}, {}, LossOptions{});
  EXPECT_NEAR(loss.item<double>(), together.sum(1).mean().item<double>(), 1e-6);
  loss.backward();
  for (const auto& p : model->named_parameters()) {
    ASSERT_TRUE(p.value().grad().defined()) << p.key();
    EXPECT_TRUE(p.value().grad().isfinite().all().item<bool>()) << p.key();
  }
}

// The default passes of 2 images: a batch of 5's losses are those of its
// passes, [0, 1], [2, 3] and [4], each given as a batch of its own (what
// lets 2 workers of 2 images match one worker of 4), up to the rounding of
// the heads, which take every RoI of the batch at once.
TEST(MaskRcnn, ABatchsLossesAreThoseOfItsBackbonePasses) {
  torch::manual_seed(5);
  const ModelOptions o = small_options();
  ASSERT_EQ(o.backbone_batch, 2);
  const std::shared_ptr<Model> model = make_model(find_model("maskrcnn"), o);
  model->train();
  const torch::Tensor together = model->forward(batch_of(o, 0, 5)).main.detach();
  ASSERT_EQ(together.sizes(), (std::vector<int64_t>{5, 5}));
  for (int64_t first = 0; first < 5; first += 2) {
    const int64_t n = std::min<int64_t>(2, 5 - first);
    const torch::Tensor pass = model->forward(batch_of(o, static_cast<uint64_t>(first), n)).main;
    EXPECT_TRUE(torch::allclose(pass.detach(), together.narrow(0, first, n), 1e-4, 1e-6))
        << "images " << first << "+" << n << ": " << pass << " in the batch: " << together;
  }
}

// DLSCALE_LOG_LEVEL=debug: each image's sampled and positive RoIs, a line
// each (what bench/families_bench.sh compares with torchvision's).
TEST(MaskRcnn, DebugLogNamesEachImagesPositiveRois) {
  torch::manual_seed(5);
  const ModelOptions o = small_options();
  const std::shared_ptr<Model> model = make_model(find_model("maskrcnn"), o);
  model->train();
  const TensorMap batch = batch_of(o, 0, 2);
  ::testing::internal::CaptureStderr();
  log_set_level(LogLevel::kDebug);
  model->forward(batch);
  log_set_level(LogLevel::kInfo);
  std::istringstream lines(::testing::internal::GetCapturedStderr());
  const std::regex line(
      R"(maskrcnn: image (\d): \d+ proposals, (\d+) RoIs sampled, (\d+) positive)");
  int images = 0;
  for (std::string text; std::getline(lines, text);) {
    std::smatch m;
    if (!std::regex_search(text, m, line)) continue;
    EXPECT_EQ(std::stoi(m[1]), images++);
    EXPECT_EQ(std::stoi(m[2]), 32) << text;
    // At least each object's own box (the ground truth joins the proposals),
    // at most a quarter of the sample.
    EXPECT_GE(std::stoi(m[3]), 1) << text;
    EXPECT_LE(std::stoi(m[3]), 8) << text;
  }
  EXPECT_EQ(images, 2);
}

TEST(MaskRcnn, AnImageWithoutObjectsTrains) {
  torch::manual_seed(6);
  const ModelOptions o = small_options();
  const std::shared_ptr<Model> model = make_model(find_model("maskrcnn"), o);
  model->train();
  {  // as the trainer lays them out by default (--memory-format channels-last)
    torch::NoGradGuard no_grad;
    for (auto& p : model->parameters()) {
      if (p.dim() == 4) p.set_data(p.contiguous(torch::MemoryFormat::ChannelsLast));
    }
  }
  TensorMap batch = batch_of(o, 4, 2);
  batch[kGtClasses][1].zero_();  // the second image has no object
  const torch::Tensor parts = model->forward(batch).main;
  // Objectness and class losses remain (everything is background); the
  // box losses and the mask loss are zero.
  EXPECT_GT(parts[1][0].item<double>(), 0);
  EXPECT_EQ(parts[1][1].item<double>(), 0);
  EXPECT_GT(parts[1][2].item<double>(), 0);
  EXPECT_EQ(parts[1][3].item<double>(), 0);
  EXPECT_EQ(parts[1][4].item<double>(), 0);
  batch[kGtClasses][0].zero_();  // a batch without any object
  const torch::Tensor none = model->forward(batch).main;
  EXPECT_EQ(none.select(1, 4).abs().sum().item<double>(), 0);
  none.sum().backward();
  for (const auto& p : model->named_parameters()) {
    // Every weight gets a gradient, the mask head's zeros: the strategies
    // exchange the same tensors whatever a worker's batch holds.
    ASSERT_TRUE(p.value().grad().defined()) << p.key();
    EXPECT_TRUE(p.value().grad().isfinite().all().item<bool>()) << p.key();
    if (p.key().find(".mask.") != std::string::npos) {
      EXPECT_EQ(p.value().grad().abs().sum().item<double>(), 0) << p.key();
    }
  }
}

TEST(MaskRcnn, EvaluationGivesSharesOfMatchedRois) {
  torch::manual_seed(7);
  const ModelOptions o = small_options();
  const ModelSpec& spec = find_model("maskrcnn");
  const std::shared_ptr<Model> model = make_model(spec, o);
  model->eval();
  torch::NoGradGuard no_grad;
  const torch::Tensor shares = model->forward(batch_of(o, 8, 2)).main;
  ASSERT_EQ(shares.sizes(), (std::vector<int64_t>{2, 3}));
  EXPECT_TRUE(shares.ge(0).all().item<bool>() && shares.le(1).all().item<bool>()) << shares;
  EXPECT_GT(shares.select(1, 2).min().item<double>(), 0) << "the mask's pixels: some right";
  const std::vector<double> sums = spec.task->evaluate({shares, {}}, {});
  EXPECT_NEAR(sums[2], shares.select(1, 2).sum().item<double>(), 1e-12);
  EXPECT_EQ(spec.task->metrics().front().name, "box_acc");
}

TEST(MaskRcnn, FlopsCountEachSampledRoiThroughTheHeads) {
  const ModelSpec& spec = find_model("maskrcnn");
  const int64_t classes = 5;
  const int64_t box = 256 * 7 * 7 * 1024 + 1024 * 1024 + 1024 * classes + 1024 * 4 * classes;
  const int64_t mask =
      4 * (256 * 256 * 9 * 14 * 14) + 256 * 256 * 4 * 14 * 14 + 256 * classes * 28 * 28;
  const int64_t fewer = describe_model(spec, small_options(64)).macs_per_sample;
  const int64_t more = describe_model(spec, small_options(128)).macs_per_sample;
  EXPECT_EQ(more - fewer, 64 * box + 16 * mask);
  EXPECT_GT(fewer, 64 * box + 16 * mask) << "and the backbone, FPN and RPN";
}

TEST(MaskRcnn, RefusesSizesClassesAndRoisThatDoNotFit) {
  const auto message = testing::error_of;
  const ModelSpec& spec = find_model("maskrcnn");
  ModelOptions o;
  o.name = "maskrcnn";
  o.image_size = 32;
  EXPECT_EQ(message([&] { resolve_options(spec, o); }),
            "model 'maskrcnn' needs --image-size >= 64 (got 32)");
  o.image_size = 64;
  o.num_classes = 1;
  EXPECT_EQ(message([&] { resolve_options(spec, o); }),
            "--classes must be >= 2 for model 'maskrcnn' (the background and a class) (got 1)");
  o.num_classes = 0;
  o.rois = -3;
  EXPECT_EQ(message([&] { resolve_options(spec, o); }), "--rois must be >= 1 (got -3)");
  o.rois = 0;
  o.backbone_batch = -1;
  EXPECT_EQ(message([&] { resolve_options(spec, o); }), "--backbone-batch must be >= 1 (got -1)");
  ModelOptions resnet;
  resnet.name = "resnet18";
  resnet.rois = 64;
  EXPECT_EQ(message([&] { resolve_options(find_model("resnet18"), resnet); }),
            "--rois does not apply to model 'resnet18' (family cnn); it takes --image-size, "
            "--classes and --dropout");
  ModelOptions ssd;
  ssd.name = "ssd300";
  ssd.backbone_batch = 2;
  EXPECT_NE(message([&] {
              resolve_options(find_model("ssd300"), ssd);
            }).find("--backbone-batch does not apply to model 'ssd300'"),
            std::string::npos);
}

}  // namespace
}  // namespace dlscale::models
