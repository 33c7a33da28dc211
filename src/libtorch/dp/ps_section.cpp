// The parameter server's own part of a run's record and console output
// (libtorch/dp/ps_sync.h): what a sweep keeps as ps_* metrics sits at the section's
// top, the worst shard's bytes and time (the PS link is the bottleneck) and
// the staleness; each shard's report below it.
#include <fmt/format.h>

#include <algorithm>

#include "libtorch/dp/ps_sync.h"

namespace dlscale::dp {

nlohmann::json ps_section(const PsOptions& o, const std::vector<int64_t>& shard_bytes, double imbalance,
                          const std::vector<ShardReport>& reports) {
  nlohmann::json shards = nlohmann::json::array();
  double in_max = 0;
  double busy_max = 0;
  double stale_sum = 0;
  int64_t updates = 0;
  int64_t stale_max = 0;
  std::vector<int64_t> histogram;
  for (const auto& r : reports) {
    shards.push_back({{"shard", r.shard},
                      {"bytes", r.bytes},
                      {"busy_ms_per_step", r.busy_seconds_per_step * 1e3},
                      {"bytes_in_per_step", r.bytes_in_per_step},
                      {"bytes_out_per_step", r.bytes_out_per_step},
                      {"updates", r.updates},
                      {"staleness_mean", r.staleness_mean},
                      {"staleness_max", r.staleness_max},
                      {"staleness_histogram", r.staleness_histogram}});
    in_max = std::max(in_max, r.bytes_in_per_step);
    busy_max = std::max(busy_max, r.busy_seconds_per_step * 1e3);
    if (histogram.size() < r.staleness_histogram.size()) histogram.resize(r.staleness_histogram.size(), 0);
    for (size_t i = 0; i < r.staleness_histogram.size(); ++i) histogram[i] += r.staleness_histogram[i];
    stale_sum += r.staleness_mean * static_cast<double>(r.updates);
    updates += r.updates;
    stale_max = std::max(stale_max, r.staleness_max);
  }
  int64_t bytes_max = 0;
  for (int64_t b : shard_bytes) bytes_max = std::max(bytes_max, b);
  return {{"placement", to_string(o.placement)},
          {"assign", to_string(o.assign)},
          {"mode", to_string(o.mode)},
          {"shards", o.shards},
          {"max_staleness", o.max_staleness},
          {"partition_mb", o.partition_mb},
          {"shard_bytes", shard_bytes},
          {"shard_bytes_max", bytes_max},
          {"imbalance", imbalance},
          {"shard_bytes_in_per_step_max", in_max},
          {"shard_busy_ms_per_step_max", busy_max},
          {"staleness_mean", updates > 0 ? stale_sum / static_cast<double>(updates) : 0.0},
          {"staleness_max", stale_max},
          {"staleness_histogram", histogram},
          {"per_shard", shards}};
}

namespace {

std::string shard_mb(const std::vector<int64_t>& shard_bytes) {
  std::string s;
  for (int64_t b : shard_bytes) s += fmt::format(" {:.2f}", static_cast<double>(b) / 1e6);
  return s;
}

}  // namespace

std::string ps_header_line(const PsOptions& o, const std::vector<int64_t>& shard_bytes, double imbalance) {
  return fmt::format("  parameter server: {} shard(s) {} | {} | {}{} | shard MB{} (imbalance max/mean {:.2f})",
                     o.shards, to_string(o.placement), to_string(o.assign), to_string(o.mode),
                     o.max_staleness >= 0 ? fmt::format(" (max staleness {})", o.max_staleness) : "",
                     shard_mb(shard_bytes), imbalance);
}

std::vector<std::string> ps_summary_lines(const PsOptions& o, const std::vector<int64_t>& shard_bytes,
                                          double imbalance, const std::vector<ShardReport>& reports) {
  std::vector<std::string> lines;
  lines.push_back(fmt::format("parameter server: {} shard(s) {}, {} {}{}; shard MB{} (imbalance {:.2f})",
                              o.shards, to_string(o.placement), to_string(o.mode), to_string(o.assign),
                              o.max_staleness >= 0 ? fmt::format(", max staleness {}", o.max_staleness) : "",
                              shard_mb(shard_bytes), imbalance));
  lines.push_back("  phases: comm = push wait, optimizer = pull (the shards sum, apply, send)");
  for (const auto& r : reports) {
    lines.push_back(fmt::format("  shard {}: in {:.2f} MB/step, out {:.2f} MB/step, busy {:.2f} ms/step, {} updates",
                                r.shard, r.bytes_in_per_step / 1e6, r.bytes_out_per_step / 1e6,
                                r.busy_seconds_per_step * 1e3, r.updates));
  }
  if (o.mode == PsMode::kAsync && !reports.empty()) {
    const nlohmann::json section = ps_section(o, shard_bytes, imbalance, reports);
    const auto histogram = section["staleness_histogram"].get<std::vector<int64_t>>();
    std::string line = fmt::format("  staleness: mean {:.2f}, max {}, histogram",
                                   section["staleness_mean"].get<double>(), section["staleness_max"].get<int64_t>());
    size_t last = histogram.size();
    while (last > 1 && histogram[last - 1] == 0) --last;
    for (size_t i = 0; i < last; ++i) line += fmt::format(" {}", histogram[i]);
    lines.push_back(line);
  }
  return lines;
}

}  // namespace dlscale::dp
