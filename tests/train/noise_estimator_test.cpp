#include "train/noise_estimator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace dlscale::train {
namespace {

// Linear regression with Gaussian inputs, where the noise scale is known in
// closed form. Loss 0.5 (x·w - y)^2, x ~ N(0, I_d), y = x·w* + e, e ~ N(0, s^2),
// u = w - w*: a sample's gradient is x (x·u) - x e, with mean G = u and
// E[g g^T] = |u|^2 I + 2 u u^T + s^2 I, so tr(Σ) = (d + 1)|u|^2 + d s^2 and
// B_simple = tr(Σ)/|G|^2.
class LinearRegression {
 public:
  static constexpr int kDim = 10;
  explicit LinearRegression(uint64_t seed) : rng_(seed) {
    for (double v : u_) u2_ += v * v;
  }
  double gradient_sq() const { return u2_; }                                             // |G|^2
  double b_simple() const { return ((kDim + 1) * u2_ + kDim * kSigma * kSigma) / u2_; }  // 12.54
  /// The mean gradient over `batch` fresh samples.
  std::vector<double> gradient(int batch) {
    std::vector<double> g(kDim, 0.0), x(kDim);
    for (int s = 0; s < batch; ++s) {
      double xu = 0;
      for (int i = 0; i < kDim; ++i) {
        x[i] = normal_(rng_);
        xu += x[i] * u_[i];
      }
      const double e = kSigma * normal_(rng_);
      for (int i = 0; i < kDim; ++i) g[i] += x[i] * (xu - e) / batch;
    }
    return g;
  }

 private:
  static constexpr double kSigma = 0.7;
  const std::vector<double> u_ = {1, -0.5, 0.25, 0, 0.5, -1, 0.75, 0, 0.1, -0.2};
  double u2_ = 0;
  std::mt19937_64 rng_;
  std::normal_distribution<double> normal_{0.0, 1.0};
};

// Workers of b samples each give the small batch, their average the large
// one, as --noise-scale measures a run.
TEST(NoiseEstimator, FindsTheClosedFormNoiseScaleOfLinearRegression) {
  constexpr int kWorkers = 4, kBatch = 8;
  LinearRegression task(7);
  NoiseEstimator estimator(kBatch, kBatch * kWorkers, 0.999);
  std::vector<double> mean(LinearRegression::kDim);
  for (int step = 0; step < 20000; ++step) {
    std::fill(mean.begin(), mean.end(), 0.0);
    double small_sq = 0;
    for (int w = 0; w < kWorkers; ++w) {
      const std::vector<double> worker = task.gradient(kBatch);
      for (int i = 0; i < LinearRegression::kDim; ++i) {
        small_sq += worker[i] * worker[i] / kWorkers;
        mean[i] += worker[i] / kWorkers;
      }
    }
    double big_sq = 0;
    for (double v : mean) big_sq += v * v;
    estimator.add(small_sq, big_sq);
  }
  const double truth = task.b_simple(), u2 = task.gradient_sq();
  EXPECT_NEAR(estimator.b_simple(), truth, 0.1 * truth);
  EXPECT_NEAR(estimator.gradient_sq(), u2, 0.1 * u2);
  EXPECT_NEAR(estimator.trace_sigma(), truth * u2, 0.1 * truth * u2);
}

// --noise-final: the same linear regression at fixed weights, 4,000
// gradients of 32 samples each, from |Σ g_t|^2 and Σ |g_t|^2 alone.
TEST(NoiseEstimator, FixedWeightsFindTheClosedFormNoiseScaleFromEveryPair) {
  constexpr int kBatch = 32, kGradients = 4000;
  LinearRegression task(11);
  std::vector<double> sum(LinearRegression::kDim, 0.0);
  double sq_sum = 0;
  for (int t = 0; t < kGradients; ++t) {
    const std::vector<double> g = task.gradient(kBatch);
    for (int i = 0; i < LinearRegression::kDim; ++i) {
      sq_sum += g[i] * g[i];
      sum[i] += g[i];
    }
  }
  double sum_sq = 0;
  for (double v : sum) sum_sq += v * v;
  const FixedWeightsNoise n = fixed_weights_noise(sum_sq, sq_sum, kGradients, kBatch);
  const double truth = task.b_simple(), u2 = task.gradient_sq();
  EXPECT_NEAR(n.b_simple(), truth, 0.1 * truth);
  EXPECT_NEAR(n.gradient_sq, u2, 0.1 * u2);
  EXPECT_NEAR(n.trace_sigma, truth * u2, 0.1 * truth * u2);
}

// By hand: 2 gradients (1, 0) and (0, 1) of 4 samples: |Σ g|^2 = 2, Σ|g|^2 =
// 2, so |G|^2 = 0 (B_simple undefined) and tr(Σ) = 4 (2/2 - 0) = 4; one
// gradient alone estimates nothing.
TEST(NoiseEstimator, FixedWeightsByHand) {
  const FixedWeightsNoise orthogonal = fixed_weights_noise(2, 2, 2, 4);
  EXPECT_DOUBLE_EQ(orthogonal.gradient_sq, 0.0);
  EXPECT_DOUBLE_EQ(orthogonal.trace_sigma, 4.0);
  EXPECT_TRUE(std::isnan(orthogonal.b_simple()));
  // (1, 0) twice: |Σ g|^2 = 4, Σ|g|^2 = 2: |G|^2 = 1, tr(Σ) = 0.
  const FixedWeightsNoise same = fixed_weights_noise(4, 2, 2, 4);
  EXPECT_DOUBLE_EQ(same.gradient_sq, 1.0);
  EXPECT_DOUBLE_EQ(same.b_simple(), 0.0);
  EXPECT_TRUE(std::isnan(fixed_weights_noise(1, 1, 1, 4).gradient_sq));
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
