#include "train/train_options.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "libtorch/data/data_spec.h"
#include "libtorch/train/resolve.h"

namespace dlscale::train {
namespace {

std::string error_of(const TrainOptions& o) {
  try {
    resolve_train_options(o);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(TrainOptions, DefaultsResolve) {
  TrainOptions o;
  o.model.name = "lenet";
  ResolvedTrainOptions r = resolve_train_options(o);
  open_training_data(r);  // synthetic data: the model's defaults
  EXPECT_EQ(r.options.model.image_size, 28);
  EXPECT_EQ(r.options.model.num_classes, 10);
  EXPECT_EQ(r.channels, 1);
  EXPECT_EQ(r.measured_steps, 17);
  EXPECT_EQ(r.global_batch, 32);
  EXPECT_EQ(r.world_size, 1);
  EXPECT_GE(r.options.compute.threads, 1);
  EXPECT_EQ(r.options.optimizer.kind, OptimizerKind::kSgd);
}

TEST(TrainOptions, EachBadInputIsNamed) {
  TrainOptions o;
  o.model.name = "nope";
  EXPECT_NE(error_of(o).find("unknown model 'nope'; known models: lenet, tinycnn, alexnet"),
            std::string::npos);
  o = {};
  o.run.batch = 0;
  EXPECT_EQ(error_of(o), "--batch must be in [1, 1048576] (got 0)");
  o = {};
  o.run.batch = -4;
  EXPECT_EQ(error_of(o), "--batch must be in [1, 1048576] (got -4)");
  o = {};
  o.run.steps = 3;
  o.run.warmup = 3;
  EXPECT_NE(error_of(o).find("--steps (3) must be greater than --warmup (3)"), std::string::npos);
  o = {};
  o.run.warmup = -1;
  EXPECT_EQ(error_of(o), "--warmup must be >= 0 (got -1)");
  o = {};
  o.model.name = "inception3";
  o.model.image_size = 32;
  EXPECT_EQ(error_of(o), "model 'inception3' needs --image-size >= 75 (got 32)");
  o = {};
  // An unknown name never reaches the struct: the CLI parses enums at the edge.
  try {
    enum_names(OptimizerKind{}).parse("rmsprop");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "unknown optimizer 'rmsprop'; allowed: sgd, momentum, nesterov, adam, lars");
  }
  o = {};
  o.optimizer.lr = 0;
  EXPECT_EQ(error_of(o), "--lr must be in (0, 1e+06] (got 0)");
  o = {};
  o.compute.threads = -1;
  EXPECT_NE(error_of(o).find("--threads must be in [0, 1024]"), std::string::npos);
  o = {};
  o.optimizer.kind = OptimizerKind::kNesterov;
  o.optimizer.momentum = 0;
  EXPECT_NE(error_of(o).find("nesterov needs --momentum > 0"), std::string::npos);
  o = {};
  o.compute.device = "tpu";
  EXPECT_NE(error_of(o).find("'tpu'"), std::string::npos);
  o = {};
  try {
    enum_names(MemoryFormat{}).parse("nhwc");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "unknown memory format 'nhwc'; allowed: channels-last, contiguous");
  }
  o = {};
  o.output.json_path = "/nonexistent-dir/r.json";
  EXPECT_NE(error_of(o).find("directory '/nonexistent-dir' does not exist"), std::string::npos);
}

// --accumulate K: the global batch counts every micro-batch; impossible
// values and a global batch over the cap are one line each.
TEST(TrainOptions, AccumulationMultipliesTheGlobalBatchAndBadValuesAreNamed) {
  TrainOptions o;
  o.run.batch = 8;
  o.run.accumulate = 4;
  ResolvedTrainOptions r = resolve_train_options(o, 3);
  EXPECT_EQ(r.global_batch, 96);
  EXPECT_EQ(r.micro_global_batch(), 24);
  o.run.global_batch = 96;  // strong scaling: 96 / (3 workers x 4) = 8 per micro-batch
  o.run.batch = 1;
  r = resolve_train_options(o, 3);
  EXPECT_EQ(r.options.run.batch, 8);
  EXPECT_EQ(r.global_batch, 96);
  EXPECT_EQ(r.options.run.accumulate, 4);
  o = {};
  o.run.accumulate = 0;
  EXPECT_EQ(error_of(o), "--accumulate must be in [1, 65536] (got 0; 1 = no accumulation)");
  o.run.accumulate = -2;
  EXPECT_EQ(error_of(o), "--accumulate must be in [1, 65536] (got -2; 1 = no accumulation)");
  o = {};
  o.run.global_batch = 12;
  o.run.accumulate = 5;
  EXPECT_NE(error_of(o).find("--global-batch 12 is not divisible by 1 workers x --accumulate 5"),
            std::string::npos);
  o = {};
  o.run.batch = 1 << 20;
  o.run.accumulate = 1 << 11;
  EXPECT_EQ(
      error_of(o),
      "--batch 1048576 x 1 workers x --accumulate 2048 is over the global batch cap of 1073741824");
}

TEST(TrainOptions, OptimizerNamesRoundTrip) {
  for (const char* name : {"sgd", "momentum", "nesterov", "adam"}) {
    EXPECT_EQ(to_string(enum_names(OptimizerKind{}).parse(name)), name);
  }
}

// Each option is described once: the record's inputs and what ranks agree
// on come from the same tables as the CLI's flags.
TEST(TrainOptions, RecordAndAgreementComeFromTheTables) {
  TrainOptions o;
  o.model.name = "lenet";
  o.optimizer.kind = OptimizerKind::kMomentum;
  o.sync.strategy = "tree";
  o.data.order = data::DataOrder::kGlobal;
  ResolvedTrainOptions r = resolve_train_options(o, 2, 2);
  open_training_data(r);
  const nlohmann::json in = inputs_json(r);
  EXPECT_EQ(in["model"], "lenet");
  EXPECT_EQ(in["optimizer"], "momentum");
  EXPECT_EQ(in["strategy"], "tree");
  EXPECT_EQ(in["data_order"], "global");
  EXPECT_EQ(in["image_size"], 28);
  EXPECT_EQ(in["global_batch"], 64);
  EXPECT_EQ(in["recipe"]["lr_schedule"], "constant");
  EXPECT_EQ(in["recipe"]["target_accuracy"], 0.0);
  EXPECT_EQ(in["deterministic"], false);
  const nlohmann::json agreed = agreed_inputs(r);
  for (const char* key : {"model", "batch", "global_batch", "world_size", "optimizer", "lr", "strategy",
                          "ps_shards", "data", "augment", "amp", "deterministic", "sync_buffers", "recipe.lr_schedule",
                          "recipe.target_accuracy", "recipe.epochs", "recipe.label_smoothing"}) {
    EXPECT_TRUE(agreed.contains(key)) << key;
  }
  for (const char* key : {"display_every", "threads", "json", "data_threads"}) {
    EXPECT_FALSE(agreed.contains(key)) << key;
  }
}

}  // namespace
}  // namespace dlscale::train
