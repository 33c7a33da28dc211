// Parameter counts and multiply-accumulates are torchvision's exact values for
// the same architectures (bench/torchvision_reference.py prints them).
#include "libtorch/models/model.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "libtorch/models/layers.h"

namespace dlscale::models {
namespace {

struct Expected {
  const char* name;
  int64_t image_size;
  int64_t parameters;
  int64_t macs;
};

class ModelFactsTest : public ::testing::TestWithParam<Expected> {};

void PrintTo(const Expected& e, std::ostream* os) { *os << e.name << " at " << e.image_size; }

std::string expected_name(const ::testing::TestParamInfo<Expected>& p) { return p.param.name; }

TEST_P(ModelFactsTest, MatchesTorchvision) {
  const Expected& e = GetParam();
  ModelOptions o;
  o.image_size = e.image_size;
  const ModelFacts f = describe_model(find_model(e.name), o);
  EXPECT_EQ(f.parameters, e.parameters);
  EXPECT_EQ(f.macs_per_sample, e.macs);
  EXPECT_DOUBLE_EQ(f.flops_per_sample(), 2.0 * static_cast<double>(e.macs));
  EXPECT_TRUE(f.uncounted_layers.empty()) << f.uncounted_layers.front();
}

/// A model of plain torch::nn layers beside a counted one, and an LSTM
/// inside a counting module (as gnmt's), which counts it.
class Mixed : public Model {
 public:
  struct CountedLstm : torch::nn::Module, MacCounter {
    CountedLstm() { lstm = register_module("lstm", torch::nn::LSTM(4, 4)); }
    torch::nn::LSTM lstm{nullptr};
    void clear_macs() override {}
    int64_t last_macs_per_sample() const override { return 0; }
  };
  Mixed() {
    fc = register_module("fc", Fc(4, 4));
    plain = register_module("plain", torch::nn::Linear(4, 4));
    conv = register_module("conv", torch::nn::Conv1d(1, 1, 1));
    counted = register_module("counted", std::make_shared<CountedLstm>());
  }
  Output forward(const TensorMap& inputs) override { return {plain(fc(inputs.at("x"))), {}}; }
  Fc fc{nullptr};
  torch::nn::Linear plain{nullptr};
  torch::nn::Conv1d conv{nullptr};
  std::shared_ptr<CountedLstm> counted;
};

// FLOPs are counted by the layers that count themselves: a plain torch::nn
// layer is named, and measuring the model warns, rather than its work
// silently missing from FLOPs per sample and est. GFLOP/s.
TEST(ModelZoo, LayersThatCountNoFlopsAreNamed) {
  Mixed m;
  EXPECT_EQ(uncounted_layers(m), (std::vector<std::string>{"plain (Linear)", "conv (Conv)"}));
  for (const char* name : {"lenet", "gnmt", "transformer", "ncf", "ssd300"}) {
    ModelOptions o;
    if (std::string(name) == "ssd300") o.num_classes = 5;
    const ModelSpec& spec = find_model(name);
    EXPECT_TRUE(uncounted_layers(*spec.make(resolve_options(spec, o))).empty()) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(
    DefaultSize, ModelFactsTest,
    ::testing::Values(Expected{"lenet", 28, 3274634, 13883904},
                      Expected{"alexnet", 224, 61100840, 714188480},
                      Expected{"vgg11", 224, 132863336, 7609090048},
                      Expected{"vgg16", 224, 138357544, 15470264320},
                      Expected{"vgg19", 224, 143667240, 19632062464},
                      Expected{"resnet18", 224, 11689512, 1814073344},
                      Expected{"resnet34", 224, 21797672, 3663761408},
                      Expected{"resnet50", 224, 25557032, 4089184256},
                      Expected{"resnet101", 224, 44549160, 7801405440},
                      Expected{"resnet152", 224, 60192808, 11513626624},
                      Expected{"googlenet", 224, 6624904, 1498376192},
                      Expected{"inception3", 299, 23834568, 5713216096}),
    expected_name);

INSTANTIATE_TEST_SUITE_P(
    Cifar32, ModelFactsTest,
    ::testing::Values(Expected{"lenet", 32, 3274634 + (8 * 8 - 7 * 7) * 64 * 1024, 18130944},
                      Expected{"vgg16", 32, 138357544, 436830208},
                      Expected{"resnet18", 32, 11689512, 37523456},
                      Expected{"resnet50", 32, 25557032, 85458944},
                      Expected{"resnet152", 32, 60192808, 236978176},
                      Expected{"googlenet", 32, 6624904, 31582208}),
    expected_name);

TEST(ModelZoo, AuxiliaryClassifierParameters) {
  ModelOptions o;
  o.aux_logits = true;
  EXPECT_EQ(count_parameters(*make_model(find_model("googlenet"), o)), 13004888);
  EXPECT_EQ(count_parameters(*make_model(find_model("inception3"), o)), 27161264);
}

TEST(ModelZoo, ListsEveryModel) {
  std::vector<std::string> names;
  for (const auto& s : model_specs()) names.push_back(s.name);
  EXPECT_EQ(names, (std::vector<std::string>{
                       "lenet", "tinycnn", "alexnet", "vgg11", "vgg16", "vgg19", "resnet18",
                       "resnet34", "resnet50", "resnet101", "resnet152", "googlenet", "inception3",
                       "transformer", "transformer-big", "gnmt", "ncf", "ssd300", "maskrcnn"}));
}

TEST(ModelZoo, TinyCnnParametersByHand) {
  // conv 1→16 (3×3, no bias) + BN 16; conv 16→32 + BN 32; FC (side/4)²·32 → 10.
  const int64_t blocks = 1 * 16 * 9 + 2 * 16 + 16 * 32 * 9 + 2 * 32;
  ModelOptions o;
  EXPECT_EQ(count_parameters(*make_model(find_model("tinycnn"), o)), blocks + 7 * 7 * 32 * 10 + 10);
  o.image_size = 32;
  EXPECT_EQ(count_parameters(*make_model(find_model("tinycnn"), o)), blocks + 8 * 8 * 32 * 10 + 10);
}

TEST(ModelZoo, UnknownModelListsKnownOnes) {
  try {
    find_model("resnet17");
    FAIL() << "expected dlscale::Error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("unknown model 'resnet17'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("resnet18"), std::string::npos) << msg;
    EXPECT_NE(msg.find("inception3"), std::string::npos) << msg;
  }
}

TEST(ModelZoo, ResolveFillsDefaults) {
  const ModelOptions o = resolve_options(find_model("lenet"), {});
  EXPECT_EQ(o.num_classes, 10);
  EXPECT_EQ(o.image_size, 28);
  const ModelOptions r = resolve_options(find_model("resnet50"), {});
  EXPECT_EQ(r.num_classes, 1000);
  EXPECT_EQ(r.image_size, 224);
}

TEST(ModelZoo, RefusesImagesTooSmallNamingTheMinimum) {
  ModelOptions o;
  o.image_size = 32;
  try {
    resolve_options(find_model("alexnet"), o);
    FAIL() << "expected dlscale::Error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "model 'alexnet' needs --image-size >= 63 (got 32)");
  }
  EXPECT_THROW(resolve_options(find_model("inception3"), o), Error);
  o.image_size = 0;
  o.num_classes = -1;
  EXPECT_THROW(resolve_options(find_model("resnet18"), o), Error);
  o.num_classes = 0;
  o.aux_logits = true;
  EXPECT_THROW(resolve_options(find_model("resnet18"), o), Error);
}

// The declared minimum image size is exact: it works, one pixel less fails.
TEST(ModelZoo, MinimumImageSizeIsExact) {
  for (const auto& spec : model_specs()) {
    // Image classifiers only: maskrcnn pads any size, and its least (P6's
    // stride) is a rule that tests/models/maskrcnn_test.cpp checks.
    if (spec.task != image_classification()) continue;
    for (const bool aux : {false, true}) {
      const int64_t min = aux ? spec.min_image_size_aux : spec.min_image_size;
      if (min == 0 || (aux && spec.min_image_size_aux == 0)) continue;
      SCOPED_TRACE(spec.name + (aux ? " with aux" : ""));
      ModelOptions o;
      o.num_classes = 10;
      o.aux_logits = aux;
      o.image_size = min;
      auto model = spec.make(o);
      model->train();
      const auto out = model->forward({{data::kImage, torch::randn({2, spec.channels, min, min})}});
      EXPECT_EQ(out.main.sizes(), (std::vector<int64_t>{2, 10}));
      if (min > 1) {
        o.image_size = min - 1;
        EXPECT_ANY_THROW({
          auto small = spec.make(o);
          small->train();
          small->forward({{data::kImage, torch::randn({2, spec.channels, min - 1, min - 1})}});
        });
      }
    }
  }
}

TEST(ModelZoo, AuxiliaryLogitsOnlyInTraining) {
  ModelOptions o;
  o.aux_logits = true;
  o.num_classes = 7;
  o.image_size = 64;
  auto model = make_model(find_model("googlenet"), o);
  model->train();
  auto out = model->forward({{data::kImage, torch::randn({2, 3, 64, 64})}});
  ASSERT_EQ(out.aux.size(), 2u);
  EXPECT_EQ(out.aux[0].sizes(), (std::vector<int64_t>{2, 7}));
  model->eval();
  EXPECT_TRUE(model->forward({{data::kImage, torch::randn({2, 3, 64, 64})}}).aux.empty());
}

TEST(ModelZoo, CountingMacsKeepsTrainingMode) {
  auto model = make_model(find_model("lenet"), {});
  model->train();
  count_macs_per_sample(*model, {{data::kImage, torch::zeros({1, 1, 28, 28})}});
  EXPECT_TRUE(model->is_training());
}

}  // namespace
}  // namespace dlscale::models
