// Your own model (libtorch/models/script_model.h): TorchScript modules exported at
// test time by examples/own-model/export.py (torchvision's resnet18 among
// them) take the zoo's place: the same parameters and FLOPs as the zoo's
// resnet18, inputs by name, and one line for each bad module.
#include "libtorch/models/script_model.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/files.h"
#include "libtorch/models/op_count.h"
#include "own_models.h"
#include "libtorch/predict/zoo_profile.h"
#include "process_util.h"

namespace dlscale::models {
namespace {

using testing::own_model;
using testing::own_models;

std::string module(const std::string& name) { return own_model(name); }

std::string write_task(const std::string& text) { return testing::own_file("task.yaml", text); }

ModelFacts facts_of(const std::string& name, int64_t image_size,
                    const std::string& task_file = "") {
  ModelOptions o;
  o.name = name;
  o.image_size = image_size;
  o.task_file = task_file;
  const ModelSpec& spec = model_spec(o);
  return describe_model(spec, resolve_options(spec, o));
}

TEST(ScriptModel, TorchvisionsResnet18HasTheZoosParametersAndFlops) {
  for (const std::string& name : {std::string("resnet18"), std::string("resnet18-10")}) {
    SCOPED_TRACE(name);
    const ModelFacts own = facts_of(module(name), 64);
    ModelOptions zoo_options;
    zoo_options.image_size = 64;
    zoo_options.num_classes = name == "resnet18" ? 1000 : 10;
    const ModelFacts zoo = describe_model(find_model("resnet18"), zoo_options);
    EXPECT_EQ(own.parameters, own_models().pytorch_parameters.at(name));
    EXPECT_EQ(own.parameters, zoo.parameters);
    EXPECT_EQ(own.num_classes, zoo_options.num_classes);
    EXPECT_EQ(own.family, "script");
    EXPECT_EQ(own.task, "image-classification");
    EXPECT_NEAR(static_cast<double>(own.macs_per_sample), static_cast<double>(zoo.macs_per_sample),
                0.01 * static_cast<double>(zoo.macs_per_sample));
    EXPECT_TRUE(own.uncounted_layers.empty());
  }
}

// The operator count and the zoo's layer count agree on the zoo's models:
// the same MACs two independent ways.
TEST(ScriptModel, OperatorCountEqualsTheLayerCountOnZooModels) {
  for (const std::string name :
       {"lenet", "resnet18", "vgg11", "inception3", "transformer", "gnmt", "ncf"}) {
    SCOPED_TRACE(name);
    const ModelSpec& spec = find_model(name);
    ModelOptions o;
    if (spec.takes_flag("--image-size")) o.image_size = name == "lenet" ? 28 : 96;
    if (spec.takes_flag("--vocab")) o.vocab = 512;
    if (spec.takes_flag("--hidden")) o.hidden = 64;
    o = resolve_options(spec, o);
    const auto model = spec.make(o);
    const TensorMap probe = probe_inputs(spec.task->inputs(spec, o));
    const int64_t layers = count_macs_per_sample(*model, probe);
    model->eval();
    const OpCount ops = count_op_macs([&] {
      torch::NoGradGuard no_grad;
      model->forward(probe);
    });
    EXPECT_EQ(ops.macs, layers);
    EXPECT_TRUE(ops.uncounted.empty());
  }
}

TEST(ScriptModel, ADeclaredTaskTakesInputsByNameAndCountsTheirMacs) {
  // forward(self, b, a): the task declares a first; they are matched by name.
  const std::string task = write_task(
      "inputs: [{name: a, shape: [8]}, {name: b, shape: [2]}]\n"
      "target: {name: y, shape: [4]}\nloss: mse\nmetrics: [mse]\nunit: rows\n");
  const ModelFacts f = facts_of(module("two-inputs"), 0, task);
  EXPECT_EQ(f.task, "declared");
  EXPECT_EQ(f.unit.name, "rows");
  EXPECT_EQ(f.parameters, own_models().pytorch_parameters.at("two-inputs"));
  EXPECT_EQ(f.macs_per_sample, 8 * 4 + 2 * 4);
  EXPECT_EQ(input_text(f.inputs), "a 8, b 2");
}

TEST(ScriptModel, TheEncoderCountsItsAttentionAndLinearLayers) {
  const ModelFacts f =
      facts_of(module("encoder"), 0,
               std::string(DLSCALE_SOURCE_DIR) + "/examples/own-model/encoder.task.yaml");
  EXPECT_EQ(f.task, "sequence-classification");
  EXPECT_EQ(f.parameters, own_models().pytorch_parameters.at("encoder"));
  // Per layer and token: q, k, v and out projections (4 d^2), feed-forward
  // (8 d^2), and attention's two products over 16 positions (2 x 16 d).
  const int64_t d = 64, t = 16;
  EXPECT_EQ(f.macs_per_sample, 2 * t * (4 * d * d + 8 * d * d + 2 * t * d) + d * 8);
}

// predict without a record: each operator's MACs are charged to the largest
// parameter among its operands (a layer's weight), and backward makes them
// ready from the last layer to the first.
TEST(ScriptModel, PredictsProfileChargesEachOperatorToItsWeight) {
  ModelOptions o;
  o.image_size = 32;
  double flops = 0;
  const predict::BackwardProfile p = predict::flops_backward_profile(module("small-cnn"), o, flops);
  EXPECT_DOUBLE_EQ(flops, facts_of(module("small-cnn"), 32).flops_per_sample());
  const double conv1 = 32 * 32 * 16 * 27, conv2 = 16 * 16 * 32 * 144, fc = 8192 * 10;
  const double total = conv1 + conv2 + fc;
  // conv1.weight, conv1.bias, conv2.weight, conv2.bias, fc.weight, fc.bias
  const std::vector<double> ready = {1.0,        (conv2 + fc) / total, (conv2 + fc) / total,
                                     fc / total, fc / total,           0.0};
  ASSERT_EQ(p.ready_fraction.size(), ready.size());
  for (size_t k = 0; k < ready.size(); ++k) EXPECT_NEAR(p.ready_fraction[k], ready[k], 1e-12) << k;
  EXPECT_EQ(p.bytes[0], 16 * 3 * 3 * 3 * 4);
  EXPECT_EQ(p.bytes[4], 10 * 8192 * 4);
}

// A built-in task named in the task file: the module's output fixes the
// translator's vocabulary; the recommender is probed as HR@10 evaluates it.
TEST(ScriptModel, NamedTasksTakeTheirSizesFromTheModule) {
  const std::string translation = write_task("task: translation\nseq_len: 12\n");
  const ModelFacts t = facts_of(module("translator"), 0, translation);
  EXPECT_EQ(t.task, "translation");
  EXPECT_EQ(t.unit.name, "tokens");
  EXPECT_EQ(t.unit.items_per_sample, 12);
  EXPECT_EQ(t.parameters, own_models().pytorch_parameters.at("translator"));
  EXPECT_EQ(t.macs_per_sample, 12 * (32 * 32 + 32 * 64));  // two linear layers a token
  ModelOptions o;
  o.name = module("translator");
  o.task_file = translation;
  const ModelSpec& spec = model_spec(o);
  EXPECT_EQ(resolve_options(spec, o).vocab, 64);
  EXPECT_EQ(resolve_options(spec, o).seq_len, 12);
  o.vocab = 99;
  try {
    resolve_options(spec, o);
    ADD_FAILURE() << "--vocab 99 was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "has a vocabulary of 64 (its output); --vocab must match (got 99)"),
              std::string::npos)
        << e.what();
  }
  const ModelFacts r = facts_of(module("recommender"), 0,
                                write_task("task: recommendation\nusers: 600\nitems: 2000\n"));
  EXPECT_EQ(r.task, "recommendation");
  EXPECT_EQ(r.parameters, own_models().pytorch_parameters.at("recommender"));
  EXPECT_EQ(input_text(r.inputs), "user, item");
}

TEST(ScriptModel, ABatchThatDoesNotFitTheDeclaredTaskIsNamed) {
  ModelOptions o;
  o.name = module("mnist-mlp");
  o.task_file = write_task(
      "inputs: [{name: image, shape: [1, 28, 28]}]\n"
      "target: {name: label, dtype: int64, high: 10}\nloss: cross-entropy\nmetrics: [top1]\n");
  const ModelSpec& spec = model_spec(o);
  EXPECT_TRUE(spec.checks_batches);
  const auto mismatch = [&](const torch::Tensor& image, const torch::Tensor& label) {
    data::Batch b;
    b.inputs["image"] = image;
    b.targets["label"] = label;
    return batch_mismatch(spec, o, b, "idx:d");
  };
  const torch::Tensor image = torch::zeros({4, 1, 28, 28});
  EXPECT_EQ(mismatch(image, torch::arange(4)), "");
  EXPECT_EQ(mismatch(image, torch::arange(4) * 4),
            "data 'idx:d' does not fit model '" + o.name +
                "': 'label' holds values in [0, 12]; the task declares [0, 10)");
  EXPECT_EQ(mismatch(image.to(torch::kFloat64), torch::arange(4)),
            "data 'idx:d' does not fit model '" + o.name +
                "': 'image' is 1x28x28 Double a sample; the task declares 1x28x28 Float");
  EXPECT_EQ(mismatch(torch::zeros({4, 28, 28}), torch::arange(4)),
            "data 'idx:d' does not fit model '" + o.name +
                "': 'image' is 28x28 Float a sample; the task declares 1x28x28 Float");
}

std::string load_error(const std::string& name, const std::string& task_file = "",
                       double dropout = -1, int64_t classes = 0) {
  try {
    ModelOptions o;
    o.name = name;
    o.task_file = task_file;
    o.dropout = dropout;
    o.image_size = 32;
    o.num_classes = classes;
    resolve_options(model_spec(o), o);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ScriptModel, BadModulesAreOneLineNamingWhatIsWrong) {
  const std::string dir = testing::temp_path("bad-modules");  // the exported modules are read-only
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/empty.pt").flush();
  std::ofstream(dir + "/junk.pt") << "not a zip archive, and not TorchScript";
  {
    const std::string whole = read_file(module("small-cnn"));
    std::ofstream(dir + "/truncated.pt", std::ios::binary) << whole.substr(0, whole.size() / 2);
  }
  std::filesystem::create_directories(dir + "/folder.pt");
  {
    std::ofstream(dir + "/huge.pt").flush();
    std::filesystem::resize_file(dir + "/huge.pt", int64_t{1} << 40);  // sparse: a TiB on no disk
  }
  const std::string mse3 = write_task(
      "inputs: [{name: image, shape: [3, 32, 32]}]\ntarget: {name: y, shape: [3]}\nloss: mse\n");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {load_error(dir + "/missing.pt"), "cannot read '" + dir + "/missing.pt'"},
      {load_error(dir + "/empty.pt"), "is an empty file, not a TorchScript module"},
      {load_error(dir + "/junk.pt"), "is not a TorchScript module that LibTorch"},
      {load_error(dir + "/truncated.pt"), "is not a TorchScript module that LibTorch"},
      {load_error(dir + "/folder.pt"), "is a directory, not a TorchScript file"},
      {load_error(dir + "/huge.pt"), "is 1024.0 GiB; this machine has"},
      {load_error(module("no-params")), "has no trainable parameters"},
      {load_error(module("raises")),
       "failed in forward on one sample of the declared inputs (3x32x32): "
       "builtins.ValueError: this module refuses every input"},
      {load_error(module("two-inputs")),
       "forward(b, a) takes 2 input(s); the task declares 1: image"},
      {load_error(module("small-cnn"), mse3),
       "its output for one sample is 1x10 Float; loss mse against target "
       "'y' needs float 1x3"},
      {load_error(module("small-cnn"), "", 0.1), "--dropout does not apply to model"},
      {load_error(module("recommender"), write_task("task: translation\nseq_len: 12\n")),
       "its output for one sequence of 12 tokens is 1x12 Float; translation's is 1 x 12 x "
       "vocabulary"},
      {load_error(module("translator"),
                  write_task("task: recommendation\nusers: 600\nitems: 2000\n")),
       "its output for one user and item is 1x64 Float; recommendation's is 1 score, float"},
      {load_error(module("small-cnn"), "", -1, 5),
       "has 10 classes (its output); --classes or the data's classes (5)"},
      {load_error("script:" + dir + "/missing"), "cannot read '" + dir + "/missing'"},
      {load_error("lenet", mse3),
       "--task-file declares the task of a TorchScript model (PATH.pt); model 'lenet'"},
  };
  for (const auto& [error, want] : cases) {
    EXPECT_NE(error.find(want), std::string::npos) << error << "\nwanted: " << want;
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  }
  std::filesystem::remove(dir + "/huge.pt");
}

}  // namespace
}  // namespace dlscale::models
