#include "train/noise_estimator.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace dlscale::train {
namespace {

// Linear regression with Gaussian inputs, where the noise scale is known in
// closed form. Loss 0.5 (x·w - y)^2, x ~ N(0, I_d), y = x·w* + e, e ~ N(0, s^2),
// u = w - w*: a sample's gradient is x (x·u) - x e, with mean G = u and
// E[g g^T] = |u|^2 I + 2 u u^T + s^2 I, so tr(Σ) = (d + 1)|u|^2 + d s^2 and
// B_simple = tr(Σ)/|G|^2. Workers of b samples each give the small batch,
// their average the large one, as --noise-scale measures a run.
TEST(NoiseEstimator, FindsTheClosedFormNoiseScaleOfLinearRegression) {
  constexpr int kDim = 10, kWorkers = 4, kBatch = 8;
  const std::vector<double> u = {1, -0.5, 0.25, 0, 0.5, -1, 0.75, 0, 0.1, -0.2};
  const double sigma = 0.7;
  double u2 = 0;
  for (double v : u) u2 += v * v;
  const double truth = ((kDim + 1) * u2 + kDim * sigma * sigma) / u2;

  std::mt19937_64 rng(7);
  std::normal_distribution<double> normal(0.0, 1.0);
  NoiseEstimator estimator(kBatch, kBatch * kWorkers, 0.999);
  std::vector<double> worker(kDim), mean(kDim), x(kDim);
  for (int step = 0; step < 20000; ++step) {
    std::fill(mean.begin(), mean.end(), 0.0);
    double small_sq = 0;
    for (int w = 0; w < kWorkers; ++w) {
      std::fill(worker.begin(), worker.end(), 0.0);
      for (int s = 0; s < kBatch; ++s) {
        double xu = 0;
        for (int i = 0; i < kDim; ++i) {
          x[i] = normal(rng);
          xu += x[i] * u[i];
        }
        const double e = sigma * normal(rng);
        for (int i = 0; i < kDim; ++i) worker[i] += x[i] * (xu - e) / kBatch;
      }
      for (int i = 0; i < kDim; ++i) {
        small_sq += worker[i] * worker[i] / kWorkers;
        mean[i] += worker[i] / kWorkers;
      }
    }
    double big_sq = 0;
    for (double v : mean) big_sq += v * v;
    estimator.add(small_sq, big_sq);
  }
  EXPECT_NEAR(estimator.b_simple(), truth, 0.1 * truth);  // truth = 12.54
  EXPECT_NEAR(estimator.gradient_sq(), u2, 0.1 * u2);
  EXPECT_NEAR(estimator.trace_sigma(), truth * u2, 0.1 * truth * u2);
}

// Before a step the estimate is undefined, and an estimate of |G|^2 that is
// not positive (pure noise) gives an undefined B_simple, not a clamped one.
TEST(NoiseEstimator, UndefinedEstimatesAreNaNNotClamped) {
  NoiseEstimator estimator(8, 32);
  EXPECT_TRUE(std::isnan(estimator.b_simple()));
  EXPECT_TRUE(std::isnan(estimator.gradient_sq()));
  // Small and large batches equally noisy: |G|^2 estimate (32·1 - 8·1)/24 = 1.
  estimator.add(1.0, 1.0);
  EXPECT_DOUBLE_EQ(estimator.gradient_sq(), 1.0);
  EXPECT_DOUBLE_EQ(estimator.trace_sigma(), 0.0);
  NoiseEstimator noisy(8, 32);
  noisy.add(4.0, 0.5);  // |G|^2 estimate (16 - 32)/24 < 0
  EXPECT_LT(noisy.gradient_sq(), 0);
  EXPECT_TRUE(std::isnan(noisy.b_simple()));
  EXPECT_GT(noisy.trace_sigma(), 0);
}

}  // namespace
}  // namespace dlscale::train
