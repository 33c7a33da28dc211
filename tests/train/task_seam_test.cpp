// A second task, written here in the test tree only: linear regression with
// float targets and mean squared error. It is registered like any model and
// trained through the normal trainer, strategy and record, over one and two
// workers, without any file of src/ naming it (issue 22's task seam).
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>

#include "core/error.h"
#include "data/data_util.h"
#include "libtorch/data/data_spec.h"
#include "libtorch/models/layers.h"
#include "libtorch/models/model.h"
#include "libtorch/train/resolve.h"
#include "libtorch/train/train_result.h"
#include "libtorch/train/trainer.h"
#include "train/inproc_training.h"

namespace dlscale::train {
namespace {

constexpr int64_t kFeatures = 4;

/// y = x · (1, -2, 0.5, 3) + 0.25 from Gaussian x; sample "points" hold three items each.
class Regression : public models::Task {
 public:
  std::string name() const override { return "toy-regression"; }
  std::vector<models::TensorSpec> inputs(const models::ModelSpec&, const models::ModelOptions&) const override {
    return {{"x", torch::kFloat32, {kFeatures}}};
  }
  std::vector<models::TensorSpec> targets(const models::ModelSpec&, const models::ModelOptions&) const override {
    return {{"y", torch::kFloat32, {1}}};
  }
  torch::Tensor loss(const models::Output& out, const models::TensorMap& targets,
                     const models::LossOptions&) const override {
    return torch::mse_loss(out.main, targets.at("y"));
  }
  std::vector<MetricSpec> metrics() const override { return {{"mse", "mse", false, false}}; }
  std::vector<double> evaluate(const models::Output& out, const models::TensorMap& targets) const override {
    return {(out.main - targets.at("y")).pow(2).sum().item<double>()};
  }
  models::ThroughputUnit unit(const models::ModelSpec&, const models::ModelOptions&) const override {
    return {"points", 3};
  }
  data::SampleFn synthetic(const models::ModelSpec& spec, const models::ModelOptions& options,
                           uint64_t seed) const override {
    const data::SampleFn noise = Task::synthetic(spec, options, seed);  // the generic generator
    const torch::Tensor w = torch::tensor({1.0f, -2.0f, 0.5f, 3.0f});
    return [noise, w](uint64_t index) {
      data::Sample s = noise(index);
      s.targets["y"] = (s.inputs.at("x") * w).sum().unsqueeze(0) + 0.25f;
      return s;
    };
  }
};

/// One fully connected layer from zeros: no random initialization, so ranks
/// that are threads sharing one generator build the same model.
class Linear : public models::Model {
 public:
  Linear() {
    fc_ = register_module("fc", models::Fc(kFeatures, 1));
    torch::NoGradGuard no_grad;
    for (auto& p : parameters()) p.zero_();
  }
  models::Output forward(const models::TensorMap& inputs) override { return {fc_(inputs.at("x")), {}}; }

 private:
  models::Fc fc_{nullptr};
};

void register_toy_model() {
  static std::once_flag once;
  std::call_once(once, [] {
    models::ModelSpec spec;
    spec.name = "toy-linear";
    spec.description = "linear regression (test task)";
    spec.task = std::make_shared<const Regression>();
    spec.make = [](const models::ModelOptions&) { return std::make_shared<Linear>(); };
    models::register_model(spec);
  });
}

TrainOptions toy_options(int64_t batch_per_worker) {
  register_toy_model();
  TrainOptions o;
  o.model.name = "toy-linear";
  o.run.batch = batch_per_worker;
  o.run.steps = 30;
  o.run.warmup = 1;
  o.run.display_every = 0;
  o.run.synthetic_batches = 8;
  o.compute.threads = 1;
  o.optimizer.lr = 0.05;
  return o;
}

/// Trains over `world` in-process ranks, a global batch of 16.
testing::RankZeroRun train_toy(int world) {
  return testing::train_in_process(world, toy_options(16 / world));
}

TEST(TaskSeam, ToyRegressionTrainsOverTwoWorkersAsOverOne) {
  const testing::RankZeroRun one = train_toy(1);
  const testing::RankZeroRun two = train_toy(2);
  // Data-parallel over two ranks is one process on the same global batch.
  ASSERT_EQ(one.parameters.size(), two.parameters.size());
  for (size_t i = 0; i < one.parameters.size(); ++i) {
    EXPECT_TRUE(torch::allclose(one.parameters[i], two.parameters[i], 1e-5, 1e-6))
        << one.parameters[i] << " vs " << two.parameters[i];
  }
  // It learned: the loss fell by far and the weights approach the truth.
  const auto& steps = one.result.steps;
  EXPECT_LT(steps.back().loss, 0.05 * steps.front().loss) << steps.front().loss << " -> " << steps.back().loss;
  EXPECT_NEAR(one.parameters[0][0][1].item<double>(), -2.0, 0.3);

  // The record names the task and counts its unit.
  const nlohmann::json record = to_json(two.result);
  EXPECT_EQ(record["model"]["task"], "toy-regression");
  EXPECT_EQ(record["model"]["unit"], "points");
  EXPECT_EQ(record["model"]["items_per_sample"], 3);
  EXPECT_EQ(record["model"]["macs_per_sample"], kFeatures);
  EXPECT_EQ(record["model"]["inputs"][0]["name"], "x");
  EXPECT_EQ(record["model"]["input_shape"], nlohmann::json::array({kFeatures}));
  const double sps = record["results"]["samples_per_sec"].get<double>();
  EXPECT_DOUBLE_EQ(record["results"]["items_per_sec"].get<double>(), 3 * sps);
  EXPECT_EQ(record["inputs"]["world_size"], 2);
}

TEST(TaskSeam, DataThatCannotFeedTheModelIsNamedWithIt) {
  TrainOptions o = toy_options(8);
  o.data.spec = "idx:" + testing::write_idx_dataset(16, 8, 28, false);
  try {
    Trainer t(o);
    FAIL() << "images fed a regression model";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("provides image, label; model 'toy-linear' (toy-regression) needs x, y"), std::string::npos)
        << what;
  }
}

/// The regression task, counting the trainer's calls of its data hooks.
class CountedRegression : public Regression {
 public:
  void shape_source(const models::ModelSpec& spec, const models::ModelOptions& options,
                    bool channels_last, data::SourceOptions& source) const override {
    ++shaped_sources;
    Regression::shape_source(spec, options, channels_last, source);
  }
  models::ModelOptions shaped_by_data(const models::ModelSpec& spec, models::ModelOptions options,
                                      const data::DatasetInfo* info) const override {
    ++shaped_models;
    return Regression::shaped_by_data(spec, options, info);
  }
  mutable std::atomic<int> shaped_sources{0};
  mutable std::atomic<int> shaped_models{0};
};

TEST(TaskSeam, TheTaskNotTheTrainerSaysHowDataShapesTheModel) {
  static const auto task = std::make_shared<const CountedRegression>();
  static std::once_flag once;
  std::call_once(once, [] {
    models::ModelSpec spec;  // says nothing of images: no channels, sizes or classes
    spec.name = "toy-linear-counted";
    spec.task = task;
    spec.make = [](const models::ModelOptions&) { return std::make_shared<Linear>(); };
    models::register_model(spec);
  });
  TrainOptions o = toy_options(8);
  o.model.name = "toy-linear-counted";
  o.run.steps = 3;
  const ResolvedTrainOptions resolved = resolve_train_options(o);
  EXPECT_EQ(resolved.channels, 0);  // a task that reads no images decodes none
  Trainer t(resolved, WorkerContext{});
  EXPECT_EQ(task->shaped_models.load(), 1);   // the model's options, once the data is open
  EXPECT_EQ(task->shaped_sources.load(), 1);  // the batches the source makes
  TrainObserver quiet;
  const TrainResult r = t.run(quiet);
  EXPECT_EQ(r.model.channels, 0);
  EXPECT_EQ(r.model.image_size, 0);
  EXPECT_EQ(r.model.num_classes, 0);
}

TEST(TaskSeam, ImageClassificationIsTheZoosTask) {
  const models::ModelSpec& lenet = models::find_model("lenet");
  EXPECT_EQ(lenet.task, models::image_classification());
  const models::ModelOptions o = models::resolve_options(lenet, {});
  const auto in = lenet.task->inputs(lenet, o);
  ASSERT_EQ(in.size(), 1u);
  EXPECT_EQ(in[0].shape, (std::vector<int64_t>{1, 28, 28}));
  EXPECT_THROW(models::register_model(lenet), Error);  // the name is taken
}

}  // namespace
}  // namespace dlscale::train
