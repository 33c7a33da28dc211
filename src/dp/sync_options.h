#pragma once
// The user's choice of gradient synchronisation (--strategy and its flags),
// as a typed struct; no LibTorch needed to include it.
#include <string>

namespace dlscale::dp {

enum class Strategy { kAllreduce, kTree, kHierarchical, kIndependent };
/// "allreduce" | "tree" | "hierarchical" | "independent"; throws dlscale::Error otherwise.
Strategy parse_strategy(const std::string& name);
std::string to_string(Strategy strategy);

/// The type gradients travel and are summed in.
enum class Compression { kNone, kFp16, kBf16 };
/// "none" | "fp16" | "bf16"; throws dlscale::Error otherwise.
Compression parse_compression(const std::string& name);
std::string to_string(Compression compression);

struct SyncOptions {
  Strategy strategy = Strategy::kAllreduce;
  double bucket_mb = 25.0;       ///< bucket capacity in MiB; 0 = one bucket after backward
  double first_bucket_mb = 1.0;  ///< capacity of the first bucket (the last layers' gradients)
  Compression compress = Compression::kNone;
  /// hierarchical: ranks r / ranks_per_node form a node; 0 = group by `node_name`.
  int ranks_per_node = 0;
  /// hierarchical: ranks with equal names share a node (host, or launcher node).
  std::string node_name;
};

/// Throws dlscale::Error when the combination is impossible (sizes < 0,
/// compression with independent, ...).
void check_sync_options(const SyncOptions& options);

}  // namespace dlscale::dp
