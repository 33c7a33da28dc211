#include "libtorch/train/train_result.h"

#include <gtest/gtest.h>

#include <sstream>

namespace dlscale::train {
namespace {

StepRecord step(int64_t i, double total, bool measured, double loss) {
  StepRecord r;
  r.step = i;
  r.measured = measured;
  r.loss = loss;
  r.times = {0.0, total * 0.25, total * 0.5, 0.0, total * 0.25, total};
  return r;
}

TEST(TrainSummary, ThroughputUsesWallTimeAndMeasuredStepsOnly) {
  // One warm-up step (ignored) and three measured steps of 0.1, 0.2, 0.4 s.
  const std::vector<StepRecord> steps = {step(0, 5.0, false, 3.0), step(1, 0.1, true, 2.0),
                                         step(2, 0.2, true, 1.5), step(3, 0.4, true, 1.0)};
  const TrainSummary s = summarize_steps(steps, /*global_batch=*/32, /*wall_seconds=*/0.8);
  EXPECT_EQ(s.measured_steps, 3);
  EXPECT_DOUBLE_EQ(s.samples_per_sec, 3 * 32 / 0.8);
  // per-step rates 320, 160, 80
  EXPECT_DOUBLE_EQ(s.step_rate.mean, (320.0 + 160.0 + 80.0) / 3.0);
  EXPECT_DOUBLE_EQ(s.step_rate.p50, 160.0);
  EXPECT_DOUBLE_EQ(s.step_rate.jitter, 1.4826 * 80.0);
  EXPECT_DOUBLE_EQ(s.step_time.p50, 0.2);
  EXPECT_DOUBLE_EQ(s.median_times.backward, 0.1);
  EXPECT_DOUBLE_EQ(s.median_times.forward, 0.05);
  EXPECT_DOUBLE_EQ(s.first_loss, 3.0);
  EXPECT_DOUBLE_EQ(s.last_loss, 1.0);
}

TEST(TrainSummary, StepLineGolden) {
  std::ostringstream out;
  print_step_line(out, step(9, 0.1, true, 2.25), 20, 32);
  EXPECT_EQ(out.str(), "step    10/20         320.0 samples/s  step   100.00 ms  loss 2.2500\n");
  std::ostringstream warm;
  print_step_line(warm, step(0, 0.5, false, 7.0), 20, 32);
  EXPECT_EQ(warm.str(),
            "step     1/20          64.0 samples/s  step   500.00 ms  loss 7.0000  (warm-up)\n");
}

TEST(TrainSummary, SummaryGolden) {
  TrainResult r;
  r.config.global_batch = 32;
  r.steps = {step(0, 5.0, false, 3.0), step(1, 0.1, true, 2.0), step(2, 0.2, true, 1.5),
             step(3, 0.4, true, 1.0)};
  r.summary = summarize_steps(r.steps, 32, 0.8);
  std::ostringstream out;
  print_summary(out, r);
  EXPECT_EQ(out.str(),
            std::string(78, '-') + "\n" +
                "total samples/s: 120.00  (3 measured steps x 32 samples in 0.800 s)\n"
                "per-step samples/s: 186.67 +/- 70.55 (jitter = 118.61)\n"
                "step time: p50 200.00 ms  p95 380.00 ms\n"
                "breakdown (median ms):  data 0.00  forward 50.00  backward 100.00  comm 0.00  "
                "optimizer 50.00  total 200.00\n"
                "loss: 3.0000 -> 1.0000\n");
}

}  // namespace
}  // namespace dlscale::train
