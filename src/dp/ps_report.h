#pragma once
// What a parameter-server shard reports at the end of a run; no LibTorch
// needed to include it.
#include <cstdint>
#include <vector>

namespace dlscale::dp {

/// What a parameter-server shard did over the run (sent to worker 0 at the end).
struct ShardReport {
  int shard = 0;
  int64_t bytes = 0;                 ///< its variables' bytes
  double busy_seconds_per_step = 0;  ///< summing and applying, per measured step
  double bytes_in_per_step = 0;      ///< gradients received per measured step
  double bytes_out_per_step = 0;     ///< values sent per measured step
  int64_t updates = 0;               ///< optimizer applications over the run
  double staleness_mean = 0;         ///< over every applied gradient, in versions
  int64_t staleness_max = 0;
  std::vector<int64_t> staleness_histogram;  ///< [s] = gradients s versions stale; last bin: that or more
  std::vector<double> apply_intervals;       ///< start, end pairs (monotonic s) of each apply
};

}  // namespace dlscale::dp
