#pragma once
// Order statistics and summaries used by every report (docs/metrics.md).
#include <cstddef>
#include <vector>

namespace dlscale {

/// Median of `values` (mean of the middle two for even counts); 0 when empty.
double median(std::vector<double> values);

/// Percentile `p` in [0, 100] with linear interpolation between closest ranks
/// (NumPy's default "linear" method); 0 when empty.
double percentile(std::vector<double> values, double p);

/// Arithmetic mean; 0 when empty.
double mean(const std::vector<double>& values);

/// MLPerf Training's score of a set of runs ("olympic mean"; training_rules.adoc,
/// "Benchmark Results"): the mean after dropping the smallest and the largest
/// value (one of each); the plain mean of fewer than 3 values; 0 when empty.
double olympic_mean(std::vector<double> values);

/// Sample standard deviation (n - 1 denominator); 0 for fewer than 2 values.
double stddev(const std::vector<double>& values);

/// Median absolute deviation from the median (unscaled).
double mad(const std::vector<double>& values);

/// Robust spread: 1.4826 × MAD, which estimates σ for normal data. This is
/// tf_cnn_benchmarks' "jitter".
double jitter(const std::vector<double>& values);

/// Summary of a sample.
struct Summary {
  std::size_t count = 0;
  double mean = 0;
  double stddev = 0;
  double uncertainty = 0;  ///< standard error of the mean: stddev / sqrt(count)
  double jitter = 0;       ///< 1.4826 × MAD
  double min = 0;
  double p50 = 0;
  double p95 = 0;
  double max = 0;
};

/// Computes every field of Summary for `values`.
Summary summarize(const std::vector<double>& values);

}  // namespace dlscale
