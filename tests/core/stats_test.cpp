#include "core/stats.h"

#include <gtest/gtest.h>

#include <cmath>

namespace dlscale {
namespace {

TEST(Stats, MedianOddAndEven) {
  EXPECT_DOUBLE_EQ(median({3, 1, 2}), 2.0);
  EXPECT_DOUBLE_EQ(median({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(median({}), 0.0);
}

TEST(Stats, PercentileInterpolatesLinearly) {
  // NumPy: np.percentile([10, 20, 30, 40, 50], 95) == 48.0
  EXPECT_DOUBLE_EQ(percentile({50, 10, 40, 20, 30}, 95), 48.0);
  EXPECT_DOUBLE_EQ(percentile({50, 10, 40, 20, 30}, 0), 10.0);
  EXPECT_DOUBLE_EQ(percentile({50, 10, 40, 20, 30}, 100), 50.0);
  EXPECT_DOUBLE_EQ(percentile({1, 2}, 50), 1.5);
}

TEST(Stats, MeanAndSampleStddev) {
  const std::vector<double> v{2, 4, 4, 4, 5, 5, 7, 9};
  EXPECT_DOUBLE_EQ(mean(v), 5.0);
  // sum of squared deviations = 32, n - 1 = 7
  EXPECT_DOUBLE_EQ(stddev(v), std::sqrt(32.0 / 7.0));
  EXPECT_DOUBLE_EQ(stddev({1.0}), 0.0);
}

TEST(Stats, OlympicMeanDropsTheFastestAndSlowest) {
  // MLPerf: drop one smallest and one largest, average the rest.
  EXPECT_DOUBLE_EQ(olympic_mean({12, 10, 30, 11, 13}), 12.0);  // (11 + 12 + 13) / 3
  EXPECT_DOUBLE_EQ(olympic_mean({5, 1, 9}), 5.0);
  EXPECT_DOUBLE_EQ(olympic_mean({4, 4, 4, 8}), 4.0);            // only one 4 is dropped
  // Fewer than 3 values: the plain mean.
  EXPECT_DOUBLE_EQ(olympic_mean({10, 20}), 15.0);
  EXPECT_DOUBLE_EQ(olympic_mean({7}), 7.0);
  EXPECT_DOUBLE_EQ(olympic_mean({}), 0.0);
}

TEST(Stats, JitterIsScaledMedianAbsoluteDeviation) {
  // median 3; |deviations| = 2 1 0 1 97 -> median 1
  const std::vector<double> v{1, 2, 3, 4, 100};
  EXPECT_DOUBLE_EQ(mad(v), 1.0);
  EXPECT_DOUBLE_EQ(jitter(v), 1.4826);
}

TEST(Stats, SummaryFields) {
  const Summary s = summarize({1, 2, 3, 4});
  EXPECT_EQ(s.count, 4u);
  EXPECT_DOUBLE_EQ(s.mean, 2.5);
  EXPECT_DOUBLE_EQ(s.uncertainty, stddev({1, 2, 3, 4}) / 2.0);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 4);
  EXPECT_DOUBLE_EQ(s.p50, 2.5);
  EXPECT_DOUBLE_EQ(s.p95, 3.85);
  EXPECT_DOUBLE_EQ(s.jitter, 1.4826 * 1.0);
}

}  // namespace
}  // namespace dlscale
