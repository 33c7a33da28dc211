#pragma once
// The gradient-synchronisation seam (docs/strategies.md). The trainer holds
// one GradientSync and names no strategy: it calls begin_backward() before
// backward, end_backward() after it (the wait there is the exposed
// communication), and apply_update() for the optimizer step, which a strategy
// may own (a parameter server shard, say). make_gradient_sync() maps the
// user's word (--strategy) to an implementation, one file each:
//   allreduce     bucketed_sync + allreduce_collective (backend-native allreduce)
//   tree          bucketed_sync + tree_collective (binary tree over send/recv)
//   hierarchical  bucketed_sync + hierarchical_collective (node, leaders, node)
//   independent   independent_sync (no exchange: the compute-only ceiling)
#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "dp/sync_options.h"

namespace dlscale::dp {

/// Timing of one bucket's collective in one step, seconds on the monotonic clock.
struct BucketTiming {
  int bucket = 0;
  double start = 0;
  double end = 0;
};

/// What communication cost in one step on this rank.
struct SyncStepStats {
  double exposed_seconds = 0;  ///< time the step waited for communication after backward
  double busy_seconds = 0;     ///< time the communication thread spent in collectives
  int64_t bytes = 0;           ///< bytes handed to collectives (every bucket once, wire type)
  std::vector<BucketTiming> buckets;
};

/// What a strategy is, fixed at construction.
struct SyncInfo {
  std::string strategy;                ///< allreduce | tree | hierarchical | independent
  std::string layout;                  ///< bucketed | flat | none
  std::string wire_dtype = "float32";  ///< float32 | float16 | bfloat16
  std::vector<int64_t> bucket_bytes;   ///< wire bytes of each bucket, in launch order
  double formula_bytes_sent = 0;       ///< bytes this rank sends per step, by the formula
  std::string formula;                 ///< that formula as text (S = bytes per step)
  bool keeps_replicas_identical = true;
  int nodes = 0;  ///< hierarchical: node groups; 0 otherwise
};

class GradientSync {
 public:
  virtual ~GradientSync() = default;
  virtual const SyncInfo& info() const = 0;
  /// Before backward.
  virtual void begin_backward() = 0;
  /// After backward: every parameter's .grad holds the gradient to apply (the
  /// mean over workers for synchronous strategies). Rethrows a communication
  /// failure (dlscale::PeerFailure); after one, no further collective is issued.
  virtual SyncStepStats end_backward() = 0;
  /// Applies the update; by default the local optimizer step.
  virtual void apply_update(torch::optim::Optimizer& optimizer) { optimizer.step(); }
};

/// Builds the strategy of `options` for `params` (registration order) over
/// `comm` (must outlive it; null for one worker, which gets no exchange).
/// Collective over `comm`: every rank calls it with the same options.
std::unique_ptr<GradientSync> make_gradient_sync(const SyncOptions& options,
                                                 std::vector<torch::Tensor> params,
                                                 comm::Communicator* comm);

}  // namespace dlscale::dp
