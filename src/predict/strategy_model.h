#pragma once
// The strategies the predictor models, named as the user writes them:
//   allreduce | allreduce-hd | tree | hierarchical | ps[:K|:node] | zero[:STAGE]
// followed by modifiers: +flat (one exchange after backward), +fp16 / +bf16
// (compressed wire), and for ps: +dedicated (server shards on their own
// nodes), +async, +node-aggregate (the workers of a node sum first and one
// of them talks to the servers, as tf_cnn_benchmarks' distributed mode),
// +greedy (tensors placed by size, not round-robin), +partition:MB
// (tensors over MB MiB split over the shards, BytePS's partitioning),
// +update-then-pull (every pull after the whole update, as TensorFlow's
// synchronous PS, instead of bucket by bucket as dlscale's).
// No LibTorch.
#include <string>
#include <vector>

namespace dlscale::predict {

enum class Algorithm { kRing, kHalvingDoubling, kTree, kHierarchical, kPs, kZero };

struct StrategySpec {
  std::string label;             ///< as written
  Algorithm algorithm = Algorithm::kRing;
  bool flat = false;             ///< one bucket, sent when backward ends
  std::string compress = "none"; ///< none | fp16 | bf16
  int ps_shards = 1;             ///< ps: K; 0 = one shard on each node (ps:node)
  bool ps_dedicated = false;     ///< ps: shards on their own nodes (else one on each of K workers' nodes)
  bool ps_async = false;         ///< ps: no worker waits for the others
  bool node_aggregate = false;   ///< ps: sum inside each node first
  bool ps_greedy = false;        ///< ps: tensors placed largest first on the least-loaded shard (else round-robin)
  double ps_partition_mb = 0;    ///< ps: tensors bigger than this many MiB split over shards; 0 = never
  bool ps_update_then_pull =
      false;  ///< ps: one update once every push is in, then the pulls (else bucket by bucket)
  int zero_stage = 1;            ///< zero: 1 | 2 | 3
  double wire_fraction() const { return compress == "none" ? 1.0 : 0.5; }
  /// ps: the shards at `nodes` nodes (K, or one per node).
  long long shards(long long nodes) const { return ps_shards > 0 ? ps_shards : nodes; }
};

/// Parses one strategy; throws dlscale::Error naming the bad word and what
/// is allowed.
StrategySpec parse_strategy(const std::string& text);

/// The strategies predicted when none is given: hierarchical only where a
/// node holds 2 or more workers (with one it is not defined).
std::vector<std::string> default_strategies(int workers_per_node);

}  // namespace dlscale::predict
