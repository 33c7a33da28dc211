// Task files (models/task_file.h): what a declared task reads, and one
// line naming the file, the line and the mistake for each bad one.
#include "models/task_file.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace dlscale::models {
namespace {

std::string error_of(const std::string& text) {
  try {
    parse_task_file(text, "t.yaml");
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(TaskFile, ADeclaredTaskReadsItsTensorsLossMetricsAndUnit) {
  const TaskDecl d = parse_task_file(
      "name: sequence-classification\n"
      "inputs:\n"
      "  - {name: tokens, dtype: int64, shape: [16], low: 0, high: 1000}\n"
      "  - {name: mask, shape: [16]}\n"
      "target: {name: label, dtype: int64, shape: [], high: 8}\n"
      "loss: cross-entropy\n"
      "label_smoothing: 0.1\n"
      "metrics: [top1, top5]\n"
      "unit: tokens\n"
      "items_per_sample: 16\n",
      "t.yaml");
  EXPECT_TRUE(d.builtin.empty());
  EXPECT_EQ(d.name, "sequence-classification");
  ASSERT_EQ(d.inputs.size(), 2u);
  EXPECT_EQ(d.inputs[0].name, "tokens");
  EXPECT_EQ(d.inputs[0].dtype, "int64");
  EXPECT_EQ(d.inputs[0].shape, (std::vector<int64_t>{16}));
  EXPECT_EQ(d.inputs[0].high, 1000);
  EXPECT_EQ(d.inputs[1].dtype, "float32");
  EXPECT_EQ(d.target.name, "label");
  EXPECT_TRUE(d.target.shape.empty());
  EXPECT_EQ(d.target.high, 8);
  EXPECT_EQ(d.loss, LossKind::kCrossEntropy);
  EXPECT_DOUBLE_EQ(d.label_smoothing, 0.1);
  EXPECT_EQ(d.metrics, (std::vector<std::string>{"top1", "top5"}));
  EXPECT_EQ(d.unit, "tokens");
  EXPECT_EQ(d.items_per_sample, 16);
}

TEST(TaskFile, ABuiltInTaskTakesItsChannelsAndSize) {
  const TaskDecl d =
      parse_task_file("task: image-classification\nchannels: 1\nimage_size: 28\n", "t.yaml");
  EXPECT_EQ(d.builtin, "image-classification");
  EXPECT_EQ(d.name, "image-classification");
  EXPECT_EQ(d.channels, 1);
  EXPECT_EQ(d.image_size, 28);
}

TEST(TaskFile, TranslationAndRecommendationTakeTheirOwnKeys) {
  const TaskDecl t =
      parse_task_file("task: translation\nseq_len: 24\nlabel_smoothing: 0.1\n", "t.yaml");
  EXPECT_EQ(t.builtin, "translation");
  EXPECT_EQ(t.name, "translation");
  EXPECT_EQ(t.seq_len, 24);
  EXPECT_DOUBLE_EQ(t.label_smoothing, 0.1);
  const TaskDecl r = parse_task_file("task: recommendation\nusers: 600\nitems: 2000\n", "t.yaml");
  EXPECT_EQ(r.builtin, "recommendation");
  EXPECT_EQ(r.users, 600);
  EXPECT_EQ(r.items, 2000);
}

TEST(TaskFile, MistakesAreOneLineNamingFileLineAndWhat) {
  const std::string x = "inputs: [{name: x, shape: [4]}]\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "a task file must be a mapping"},
      {"task: [\n", "not valid YAML"},
      {"colour: red\n", "t.yaml:1: unknown key 'colour' in a task file"},
      {"task: detection\n",
       "the built-in tasks a TorchScript module can take: image-classification, translation, "
       "recommendation (got 'detection')"},
      {"task: declared\n", "the built-in tasks a TorchScript module can take"},
      {"task: recommendation\nusers: 100\n", "'task: recommendation' needs 'users' and 'items'"},
      {"task: recommendation\nusers: 100\nitems: 8\n", "'items' must be in [16, "},
      {"task: translation\nchannels: 3\n",
       "t.yaml:2: 'channels' does not go with 'task: translation'; it takes: seq_len, "
       "label_smoothing"},
      {"task: translation\nseq_len: 0\n", "'seq_len' must be in [1, 65536] (got 0)"},
      {"task: image-classification\nchannels: 64\nimage_size: 4096\n",
       "an image of 64 x 4096 x 4096 would hold over 67108864 elements"},
      {"task: image-classification\nloss: mse\n",
       "'loss' does not go with 'task: image-classification'"},
      {x + "target: {name: y, shape: [1]}\nloss: mse\nchannels: 3\n",
       "t.yaml:4: 'channels' does not go with a declared task; it takes: inputs, target"},
      {x + "target: {name: y, shape: [1]}\nloss: l1\n",
       "t.yaml:3: loss must be cross-entropy, bce-with-logits or mse"},
      {x + "target: {name: y, dtype: float32}\nloss: cross-entropy\n",
       "a cross-entropy target is int64 classes"},
      {x + "target: {name: y, dtype: int64, high: 3}\nloss: mse\n",
       "a mse target is float32 or float64"},
      {x + "target: {name: y, shape: [1]}\nloss: mse\nmetrics: [top1]\n",
       "metric 'top1' does not come with loss mse; it gives: mse"},
      {x + "target: {name: y, shape: [1]}\n", "a cross-entropy target is int64"},
      {x + "target: {name: x, shape: [1]}\nloss: mse\n", "the target 'x' has an input's name"},
      {"inputs: [{name: x, dtype: complex64}]\n",
       "t.yaml:1: dtype must be float32, float64, int64 or int32"},
      {"inputs: [{name: x, shape: [0]}]\n", "'shape' must be in [1, 16777216] (got 0)"},
      {"inputs: [{name: x, shape: [65536, 65536]}]\n", "would hold over 67108864 elements"},
      {"inputs: [{name: x, dtype: int64}]\n", "integer tensor 'x' needs 'high' > 'low'"},
      {"inputs: [{name: x, high: 3}]\n", "'low' and 'high' apply to integer tensors"},
      {"inputs: [{shape: [3]}]\n", "an input needs a 'name'"},
      {"inputs: [{name: 'a b'}]\n", "'name' must be 1 to 64 letters"},
      {"inputs: []\n", "inputs must be a list of 1 to 8 tensors"},
      {"name: n\nname: m\n", "'name' appears twice"},
      {"task: image-classification\nchannels: 100\n", "'channels' must be in [1, 64] (got 100)"},
      {"task: image-classification\nimage_size: 2.5\n",
       "'image_size' must be a whole number (got '2.5')"},
      {x + "target: {name: y, dtype: int64, high: 4}\nlabel_smoothing: 1\n",
       "'label_smoothing' must be in [0, 1)"},
      {x + "target: {name: y, shape: [1]}\nloss: mse\nlabel_smoothing: 0.1\n",
       "label_smoothing applies to cross-entropy only"},
      {x + "target: {name: y, shape: [1]}\nloss: mse\nitems_per_sample: 0\n",
       "'items_per_sample' must be in"},
      {"target: {name: y, shape: [1]}\nloss: mse\n", "a declared task needs 'inputs'"},
  };
  for (const auto& [text, want] : cases) {
    const std::string e = error_of(text);
    EXPECT_NE(e.find(want), std::string::npos) << "file:\n" << text << "error: " << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
}

TEST(TaskFile, ReadingRefusesADirectoryAndAHugeFile) {
  EXPECT_THROW(read_task_file("/tmp"), Error);
  EXPECT_THROW(read_task_file("/nonexistent/t.yaml"), Error);
}

}  // namespace
}  // namespace dlscale::models
