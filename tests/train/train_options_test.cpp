#include "train/train_options.h"

#include <gtest/gtest.h>

#include "core/error.h"

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
  o.model = "lenet";
  const ResolvedTrainOptions r = resolve_train_options(o);
  EXPECT_EQ(r.options.image_size, 28);
  EXPECT_EQ(r.options.num_classes, 10);
  EXPECT_EQ(r.channels, 1);
  EXPECT_EQ(r.measured_steps, 17);
  EXPECT_EQ(r.global_batch, 32);
  EXPECT_EQ(r.world_size, 1);
  EXPECT_GE(r.options.threads, 1);
  EXPECT_EQ(r.optimizer, OptimizerKind::kSgd);
}

TEST(TrainOptions, EachBadInputIsNamed) {
  TrainOptions o;
  o.model = "nope";
  EXPECT_NE(error_of(o).find("unknown model 'nope'; known models: lenet, tinycnn, alexnet"),
            std::string::npos);
  o = {};
  o.batch = 0;
  EXPECT_EQ(error_of(o), "--batch must be in [1, 1048576] (got 0)");
  o = {};
  o.batch = -4;
  EXPECT_EQ(error_of(o), "--batch must be in [1, 1048576] (got -4)");
  o = {};
  o.steps = 3;
  o.warmup = 3;
  EXPECT_NE(error_of(o).find("--steps (3) must be greater than --warmup (3)"), std::string::npos);
  o = {};
  o.warmup = -1;
  EXPECT_EQ(error_of(o), "--warmup must be >= 0 (got -1)");
  o = {};
  o.model = "inception3";
  o.image_size = 32;
  EXPECT_EQ(error_of(o), "model 'inception3' needs --image-size >= 75 (got 32)");
  o = {};
  o.optimizer = "rmsprop";
  EXPECT_EQ(error_of(o), "unknown optimizer 'rmsprop'; allowed: sgd, momentum, nesterov, adam, lars");
  o = {};
  o.lr = 0;
  EXPECT_EQ(error_of(o), "--lr must be in (0, 1e+06] (got 0)");
  o = {};
  o.threads = -1;
  EXPECT_NE(error_of(o).find("--threads must be in [0, 1024]"), std::string::npos);
  o = {};
  o.optimizer = "nesterov";
  o.momentum = 0;
  EXPECT_NE(error_of(o).find("nesterov needs --momentum > 0"), std::string::npos);
  o = {};
  o.device = "tpu";
  EXPECT_NE(error_of(o).find("'tpu'"), std::string::npos);
  o = {};
  o.memory_format = "nhwc";
  EXPECT_EQ(error_of(o), "unknown memory format 'nhwc'; allowed: channels-last, contiguous");
  o = {};
  o.json_path = "/nonexistent-dir/r.json";
  EXPECT_NE(error_of(o).find("directory '/nonexistent-dir' does not exist"), std::string::npos);
}

TEST(TrainOptions, OptimizerNamesRoundTrip) {
  for (const char* name : {"sgd", "momentum", "nesterov", "adam"}) {
    EXPECT_EQ(to_string(parse_optimizer(name)), name);
  }
}

}  // namespace
}  // namespace dlscale::train
