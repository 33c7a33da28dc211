#pragma once
// `dlscale commbench`'s options, torch-free: the front executable parses
// them (docs/architecture.md, "Two executables").
#include <cstdint>
#include <string>
#include <vector>

namespace dlscale::commbench {

/// "allreduce" | "tree" | "hierarchical" | "broadcast" | "allgather" |
/// "reduce_scatter" | "sendrecv".
inline constexpr const char* kOperations[] = {"allreduce", "tree",           "hierarchical",
                                              "broadcast", "allgather",      "reduce_scatter",
                                              "sendrecv"};

struct CommbenchOptions {
  std::vector<std::string> ops = {"allreduce"};  ///< from kOperations; "all" expands to each
  int64_t min_bytes = 4;                         ///< smallest message, bytes
  int64_t max_bytes = 256ll << 20;               ///< largest message, bytes
  double factor = 2;                             ///< each size is the previous × factor (> 1)
  std::string dtype = "float32";                 ///< float32 | float16 | bfloat16 (f32/f16/bf16)
  int warmup = 5;                                ///< untimed iterations per size
  int iters = 20;                                ///< timed iterations per size
  int ranks_per_node = 0;                        ///< hierarchical: node groups; 0 = by host
  std::string json_path;                         ///< record file; "" = none
};

}  // namespace dlscale::commbench
