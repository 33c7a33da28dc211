#include "core/stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace dlscale {

double median(std::vector<double> values) { return percentile(std::move(values), 50.0); }

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const double clamped = std::clamp(p, 0.0, 100.0);
  const double rank = clamped / 100.0 * static_cast<double>(values.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(rank));
  const auto hi = std::min(lo + 1, values.size() - 1);
  const double frac = rank - static_cast<double>(lo);
  return values[lo] + (values[hi] - values[lo]) * frac;
}

double mean(const std::vector<double>& values) {
  if (values.empty()) return 0.0;
  return std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
}

double olympic_mean(std::vector<double> values) {
  if (values.size() < 3) return mean(values);
  std::sort(values.begin(), values.end());
  return mean(std::vector<double>(values.begin() + 1, values.end() - 1));
}

double stddev(const std::vector<double>& values) {
  if (values.size() < 2) return 0.0;
  const double m = mean(values);
  double ss = 0.0;
  for (double v : values) ss += (v - m) * (v - m);
  return std::sqrt(ss / static_cast<double>(values.size() - 1));
}

double mad(const std::vector<double>& values) {
  if (values.empty()) return 0.0;
  const double med = median(values);
  std::vector<double> dev;
  dev.reserve(values.size());
  for (double v : values) dev.push_back(std::fabs(v - med));
  return median(std::move(dev));
}

double jitter(const std::vector<double>& values) { return 1.4826 * mad(values); }

Summary summarize(const std::vector<double>& values) {
  Summary s;
  s.count = values.size();
  if (values.empty()) return s;
  s.mean = mean(values);
  s.stddev = stddev(values);
  s.uncertainty = s.stddev / std::sqrt(static_cast<double>(s.count));
  s.jitter = jitter(values);
  s.min = *std::min_element(values.begin(), values.end());
  s.max = *std::max_element(values.begin(), values.end());
  s.p50 = percentile(values, 50.0);
  s.p95 = percentile(values, 95.0);
  return s;
}

}  // namespace dlscale
