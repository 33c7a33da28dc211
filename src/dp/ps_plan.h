#pragma once
// Where each variable lives in a parameter-server job, computed the same way
// by every worker and shard from the parameters' sizes alone (no LibTorch).
//  - A unit is a whole parameter, or, with partition_mb > 0, one of the
//    near-equal pieces a bigger parameter is split into (MXNet/BytePS's big
//    array split), so one large tensor cannot overload one shard.
//  - round-robin hands units to shards in registration order (TensorFlow's
//    replica_device_setter default); greedy puts the largest unit first onto
//    the least-loaded shard by bytes, ties to the lower shard and the earlier
//    unit (TensorFlow's GreedyLoadBalancingStrategy), deterministically.
//  - A shard keeps its pieces in one flat buffer, in reverse
//    parameter order (about the order backward produces gradients), cut into
//    push buckets by dp/bucket_plan.h, as every bucketing strategy is.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "dp/ps_assign.h"

namespace dlscale::dp {

struct PsPiece {
  int param = 0;             ///< index in registration order
  int64_t offset = 0;        ///< first element within the parameter (memory order)
  int64_t length = 0;        ///< elements
  int shard = 0;
  int64_t shard_offset = 0;  ///< first element within the shard's buffer
  int bucket = 0;            ///< push bucket within the shard
};

struct PsBucket {
  int64_t offset = 0;  ///< elements, within the shard's buffer
  int64_t length = 0;
};

struct PsShardPlan {
  int64_t elements = 0;
  std::vector<size_t> pieces;  ///< indices into PsPlan::pieces, in buffer order
  std::vector<PsBucket> buckets;
};

struct PsPlan {
  int64_t element_bytes = 4;  ///< of the parameters' type
  std::vector<PsPiece> pieces;
  std::vector<PsShardPlan> shards;
  std::vector<std::vector<size_t>> pieces_of_param;  ///< param -> its pieces
  /// Largest shard's bytes over the mean (1 = perfectly balanced).
  double imbalance() const;
};

/// Plans `numels` (elements of each parameter, registration order; each
/// element `element_bytes` bytes) over `shards` shards. Throws
/// dlscale::Error for shards < 1 or more shards than there are units to
/// place (a shard would hold nothing).
PsPlan plan_ps(const std::vector<int64_t>& numels, int shards, PsAssign assign,
               double partition_mb, double bucket_mb, double first_bucket_mb,
               int64_t element_bytes = 4);

}  // namespace dlscale::dp
