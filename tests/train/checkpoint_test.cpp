// The checkpoint's framing and metadata (train/checkpoint_meta.h): what a
// run writes reads back the same, an older file without the rate curve
// still reads, and every field edited out of range is named.
#include "train/checkpoint_meta.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace dlscale::train {
namespace {

CheckpointMeta sample() {
  CheckpointMeta m;
  m.model = "lenet";
  m.world_size = 2;
  m.global_batch = 64;
  m.optimizer = "momentum";
  m.parameters = 8;
  m.buffers = 0;
  m.seed = 42;
  m.data = "synthetic";
  m.next_step = 10;
  m.steps = 20;
  m.run_seconds = 1.5;
  m.lr_curve = {{10, 0.1}, {11, 0.1}, {19, 0.01}};
  EvalRecord e;
  e.step = 10;
  e.epoch = 0.5;
  e.metrics = {{"top1", 0.25}, {"top5", 0.75}};
  e.samples = 100;
  e.seconds = 0.1;
  e.run_seconds = 1.4;
  m.evals = {e};
  return m;
}

std::string error_of(const nlohmann::json& meta) {
  try {
    parse_checkpoint_meta(meta, "c.bin");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A task's metrics travel with the checkpoint: its evaluations are read
// by them (a non-percentage may leave [0, 1]), and a damaged list is named.
TEST(CheckpointMeta, KeepsTheTasksMetricsAndChecksThem) {
  CheckpointMeta m = sample();
  m.metrics = {{"mse", "mse", false, false}};
  m.evals[0].metrics = {{"mse", 3.5}};
  const nlohmann::json j = to_json(m);
  const CheckpointMeta back = parse_checkpoint_meta(j, "c.bin");
  EXPECT_EQ(to_json(back), j);
  ASSERT_EQ(back.metrics.size(), 1u);
  EXPECT_FALSE(back.metrics[0].higher_is_better);
  EXPECT_EQ(back.evals[0].metric("mse"), 3.5);
  nlohmann::json bad = j;
  bad["metrics"][0]["percent"] = "no";
  EXPECT_EQ(error_of(bad), "checkpoint c.bin is damaged: 'metrics[0].percent' is not true or false");
  bad = j;
  bad["metrics"][0]["name"] = "step";
  EXPECT_EQ(error_of(bad), "checkpoint c.bin is damaged: 'metrics[0].name' 'step' is a field of every evaluation");
  bad = j;
  bad["evals"][0].erase("mse");
  EXPECT_EQ(error_of(bad), "checkpoint c.bin is damaged: 'evals[0].mse' is missing");
}

TEST(CheckpointMeta, RoundTripsAndReadsFilesWithoutTheRateCurve) {
  const nlohmann::json j = to_json(sample());
  EXPECT_EQ(to_json(parse_checkpoint_meta(j, "c.bin")), j);
  nlohmann::json old = j;
  old.erase("lr_curve");
  EXPECT_TRUE(parse_checkpoint_meta(old, "c.bin").lr_curve.empty());
  // Framing: the sections come back, and one changed byte is caught.
  const std::string framed = frame_checkpoint({j.dump(), "t", "", "rng"});
  EXPECT_EQ(checkpoint_sections(framed, "c.bin"),
            (std::vector<std::string>{j.dump(), "t", "", "rng"}));
  std::string altered = framed;
  altered[30] ^= 1;
  EXPECT_THROW(checkpoint_sections(altered, "c.bin"), Error);
}

TEST(CheckpointMeta, EveryBadFieldIsNamed) {
  const nlohmann::json good = to_json(sample());
  const std::vector<std::pair<std::string, nlohmann::json>> bad = {
      {"schema", "dlscale.checkpoint/9"}, {"model", ""},         {"model", 3},
      {"world_size", 0},                  {"world_size", 2.5},   {"global_batch", -1},
      {"optimizer", nullptr},             {"parameters", -1},    {"seed", -1},
      {"data", false},                    {"steps", 0},          {"next_step", 21},
      {"next_step", -5},                  {"run_seconds", "1"},  {"lr_curve", 3},
      {"lr_curve", nlohmann::json::parse("[[9, 0.1]]")},         {"lr_curve", nlohmann::json::parse("[[10]]")},
      {"lr_curve", nlohmann::json::parse("[[10, -1]]")},         {"evals", "none"},
      {"steps", 18446744073709551615ull}};
  for (const auto& [key, value] : bad) {
    nlohmann::json meta = good;
    meta[key] = value;
    const std::string err = error_of(meta);
    EXPECT_EQ(err.rfind("checkpoint c.bin is damaged: '" + key + "' ", 0), 0u) << key << " = " << value << ": " << err;
  }
  for (const char* key : {"top1", "top5"}) {
    nlohmann::json meta = good;
    meta["evals"][0][key] = 1.5;
    EXPECT_EQ(error_of(meta), std::string("checkpoint c.bin is damaged: 'evals[0].") + key +
                                  "' is 1.5, expected 0 .. 1");
  }
  nlohmann::json meta = good;
  meta["evals"][0] = "x";
  EXPECT_EQ(error_of(meta), "checkpoint c.bin is damaged: 'evals[0]' is not an object");
  EXPECT_EQ(error_of(nlohmann::json::array()), "checkpoint c.bin is damaged: metadata is not an object");
}

}  // namespace
}  // namespace dlscale::train
