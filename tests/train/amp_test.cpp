#include "libtorch/train/amp.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "libtorch/compute/devices.h"
#include "core/error.h"
#include "libtorch/compute/torch_compat.h"
#include "libtorch/train/trainer.h"

namespace dlscale::train {
namespace {

TEST(Amp, ParsesModes) {
  EXPECT_EQ(parse_amp("none"), AmpMode::kNone);
  EXPECT_EQ(parse_amp("bf16"), AmpMode::kBf16);
  EXPECT_EQ(parse_amp("fp16"), AmpMode::kFp16);
  EXPECT_EQ(amp_dtype(AmpMode::kBf16), torch::kBFloat16);
  try {
    parse_amp("fp8");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "unknown --amp 'fp8'; allowed: none, bf16, fp16");
  }
}

/// One parameter whose gradient is `grad`.
std::vector<torch::Tensor> param_with_grad(torch::Tensor grad) {
  torch::Tensor p = torch::zeros_like(grad).set_requires_grad(true);
  p.mutable_grad() = std::move(grad);
  return {p};
}

TEST(LossScaler, UnscalesFiniteGradientsAndGrowsAfterTheInterval) {
  LossScalerOptions o;
  o.init_scale = 8;
  o.growth_interval = 2;
  LossScaler s(true, o);
  EXPECT_DOUBLE_EQ(s.scale_loss(torch::tensor(1.5)).item<double>(), 12.0);
  auto params = param_with_grad(torch::tensor({8.0f, -16.0f}));
  EXPECT_TRUE(s.unscale(params));
  EXPECT_TRUE(torch::equal(params[0].grad(), torch::tensor({1.0f, -2.0f})));
  EXPECT_DOUBLE_EQ(s.scale(), 8);
  EXPECT_TRUE(s.unscale(param_with_grad(torch::ones({2}))));
  EXPECT_DOUBLE_EQ(s.scale(), 16);  // two good steps in a row
  EXPECT_EQ(s.skipped_steps(), 0);
}

TEST(LossScaler, SkipsStepsWithInfOrNanAndBacksOff) {
  LossScalerOptions o;
  o.init_scale = 1024;
  LossScaler s(true, o);
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_FALSE(s.unscale(param_with_grad(torch::tensor({1.0f, inf}))));
  EXPECT_DOUBLE_EQ(s.scale(), 512);
  EXPECT_FALSE(s.unscale(param_with_grad(torch::tensor({std::nanf("")}))));
  EXPECT_DOUBLE_EQ(s.scale(), 256);
  EXPECT_EQ(s.skipped_steps(), 2);
  EXPECT_TRUE(s.unscale(param_with_grad(torch::ones({1}))));
}

TEST(LossScaler, DisabledIsTheIdentity) {
  LossScaler s(false);
  EXPECT_DOUBLE_EQ(s.scale_loss(torch::tensor(2.0)).item<double>(), 2.0);
  auto params = param_with_grad(torch::tensor({3.0f}));
  EXPECT_TRUE(s.unscale(params));
  EXPECT_FLOAT_EQ(params[0].grad().item<float>(), 3.0f);
}

TrainOptions lenet(int64_t steps) {
  TrainOptions o;
  o.model.name = "lenet";
  o.run.batch = 16;
  o.run.steps = steps;
  o.run.warmup = 1;
  o.compute.threads = 1;
  o.run.display_every = 0;
  o.model.dropout = 0;
  o.optimizer.kind = OptimizerKind::kMomentum;
  return o;
}

// bf16 autocast on CPU trains with the losses of fp32 (within bf16's
// precision) and is recorded.
TEST(Amp, Bf16OnCpuTracksFp32) {
  TrainOptions o = lenet(6);
  TrainObserver quiet;
  const TrainResult fp32 = Trainer(o).run(quiet);
  o.compute.amp = AmpMode::kBf16;
  const TrainResult bf16 = Trainer(o).run(quiet);
  ASSERT_EQ(bf16.steps.size(), fp32.steps.size());
  for (size_t i = 0; i < fp32.steps.size(); ++i) {
    ASSERT_TRUE(std::isfinite(bf16.steps[i].loss));
    EXPECT_NEAR(bf16.steps[i].loss, fp32.steps[i].loss, 0.05 * fp32.steps[i].loss) << "step " << i;
  }
  EXPECT_EQ(bf16.config.options.compute.amp, AmpMode::kBf16);
  EXPECT_EQ(bf16.runtime.phase_timing, "host-clock");
  EXPECT_EQ(to_json(bf16).at("precision").at("amp"), "bf16");
  EXPECT_EQ(to_json(bf16).at("inputs").at("amp"), "bf16");
}

TEST(Amp, Fp16NeedsAGpu) {
  TrainOptions o = lenet(4);
  o.compute.amp = AmpMode::kFp16;
  try {
    resolve_train_options(o);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "--amp fp16 needs --device cuda (on CPU use --amp bf16)");
  }
}

TEST(Devices, CpuAndErrors) {
  EXPECT_TRUE(worker_device("cpu", 1, 2, false).is_cpu());
  EXPECT_THROW(worker_device("gpu", 0, 1, false), Error);
  if (compat::cuda_device_count() == 0) {
    try {
      worker_device("cuda", 0, 1, false);
      FAIL();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("no GPU is visible"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace dlscale::train
