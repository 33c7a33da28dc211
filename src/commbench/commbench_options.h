#pragma once
// `dlscale commbench`'s options, torch-free: the front executable parses
// them (docs/architecture.md, "Two executables").
#include <cstdint>
#include <string>
#include <vector>

#include "core/option_table.h"
#include "dp/sync_options.h"

namespace dlscale::commbench {

/// What commbench times besides the bucket collectives (the bucketed
/// strategies' words, dp::bucket_collective_names()).
inline constexpr const char* kOtherOperations[] = {"broadcast", "allgather", "reduce_scatter",
                                                   "sendrecv"};

/// Every --op: the bucket collectives, then kOtherOperations.
inline std::vector<std::string> commbench_operations() {
  std::vector<std::string> ops = dp::bucket_collective_names();
  ops.insert(ops.end(), std::begin(kOtherOperations), std::end(kOtherOperations));
  return ops;
}

/// The flags of `dlscale commbench` (its launch flags aside), their help and
/// their keys in the record's inputs, listed once (core/option_table.h).
struct CommbenchOptions {
  std::vector<std::string> ops = {
      "allreduce"};  ///< of commbench_operations(); "all" expands to each
  std::string min_size = "4";                    ///< --min-bytes as given (K/M/G suffixes)
  std::string max_size = "256M";                 ///< --max-bytes as given
  int64_t min_bytes = 4;                         ///< smallest message, bytes (from min_size)
  int64_t max_bytes = 256ll << 20;               ///< largest message, bytes (from max_size)
  double factor = 2;                             ///< each size is the previous × factor (> 1)
  std::string dtype = "float32";                 ///< float32 | float16 | bfloat16 (f32/f16/bf16)
  int warmup = 5;                                ///< untimed iterations per size
  int iters = 20;                                ///< timed iterations per size
  int ranks_per_node = 0;                        ///< hierarchical: node groups; 0 = by host
  std::string json_path;                         ///< record file; "" = none

  /// The sizes are recorded in bytes (min_bytes, max_bytes), not as given.
  template <typename Self, typename Visitor>
  static void table(Self& s, Visitor&& v) {
    std::string bucketed;
    for (const std::string& name : dp::bucket_collective_names()) bucketed += name + " | ";
    v(Option{"--op",
             "Operations, comma-separated or repeated: " + bucketed +
                 "broadcast | allgather | reduce_scatter | sendrecv (ping-pong, ranks 0-1) | all; "
                 "the "
                 "first are the bucketed strategies' collectives, as --strategy runs them",
             "ops"},
      s.ops);
    v(Option{"--min-bytes,-b", "Smallest message; K/M/G suffixes (x1024)", nullptr}, s.min_size);
    v(Option{"--max-bytes,-e", "Largest message; K/M/G suffixes (x1024)", nullptr}, s.max_size);
    v(Option{"--factor,-f", "Each size is the previous times this", "factor"}, s.factor);
    v(Option{"--dtype,-d", "float32 | float16 | bfloat16 (f32, f16, bf16)", "dtype"}, s.dtype);
    v(Option{"--warmup,-w", "Untimed iterations per size", "warmup"}, s.warmup);
    v(Option{"--iters,-i", "Timed iterations per size (their mean is reported)", "iters"}, s.iters);
    v(Option{"--ranks-per-node",
             "hierarchical: node groups of this many consecutive ranks; 0 = by host",
             "ranks_per_node"},
      s.ranks_per_node);
    v(Option{"--json",
             "Write the JSON record (every row, the fits, the environment) here, atomically",
             nullptr}
          .no_default(),
      s.json_path);
  }
};

}  // namespace dlscale::commbench
