#pragma once
// The user's choice of gradient synchronisation (--strategy and its flags),
// as a typed struct; no LibTorch needed to include it.
#include <string>

namespace dlscale::dp {

enum class StrategyKind { kAllreduce, kTree, kHierarchical, kIndependent, kPs };
/// "allreduce" | "tree" | "hierarchical" | "independent" | "ps"; throws dlscale::Error otherwise.
StrategyKind parse_strategy(const std::string& name);
std::string to_string(StrategyKind strategy);

/// The type gradients travel and are summed in.
enum class Compression { kNone, kFp16, kBf16 };
/// "none" | "fp16" | "bf16"; throws dlscale::Error otherwise.
Compression parse_compression(const std::string& name);
std::string to_string(Compression compression);

/// Parameter server (docs/strategies.md): where the shards run, how
/// variables are spread over them, and when a shard applies gradients.
enum class PsPlacement { kColocated, kDedicated };
enum class PsAssign { kRoundRobin, kGreedy };
enum class PsMode { kSync, kAsync };
PsPlacement parse_ps_placement(const std::string& name);
std::string to_string(PsPlacement placement);
PsAssign parse_ps_assign(const std::string& name);
std::string to_string(PsAssign assign);
PsMode parse_ps_mode(const std::string& name);
std::string to_string(PsMode mode);

struct PsOptions {
  int shards = 1;
  PsPlacement placement = PsPlacement::kColocated;
  PsAssign assign = PsAssign::kRoundRobin;
  double partition_mb = 0;  ///< split tensors bigger than this over shards; 0 = never
  PsMode mode = PsMode::kSync;
  int max_staleness = -1;  ///< async: bound in versions (stale synchronous parallel); -1 = none
};

struct SyncOptions {
  StrategyKind strategy = StrategyKind::kAllreduce;
  double bucket_mb = 25.0;       ///< bucket capacity in MiB; 0 = one bucket after backward
  double first_bucket_mb = 1.0;  ///< capacity of the first bucket (the last layers' gradients)
  Compression compress = Compression::kNone;
  /// hierarchical: ranks r / ranks_per_node form a node; 0 = group by `node_name`.
  int ranks_per_node = 0;
  /// hierarchical: ranks with equal names share a node (host, or launcher node).
  std::string node_name;
  PsOptions ps;  ///< --strategy ps only
};

/// Throws dlscale::Error when the combination is impossible (sizes < 0,
/// compression with independent, PS flags without --strategy ps, ...).
void check_sync_options(const SyncOptions& options);

}  // namespace dlscale::dp
