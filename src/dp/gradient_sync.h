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
//   ps            ps_sync (workers) + ps_shard (servers): parameter server
#include <torch/torch.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "dp/ps_report.h"
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
  std::vector<int64_t> shard_bytes;  ///< ps: bytes of the variables each shard holds
  double shard_imbalance = 0;        ///< ps: largest shard's bytes over the mean
};

/// Builds an optimizer over the given tensors (a shard owns its variables' optimizer).
using OptimizerFactory =
    std::function<std::unique_ptr<torch::optim::Optimizer>(std::vector<torch::Tensor>)>;

class GradientSync {
 public:
  virtual ~GradientSync() = default;
  virtual const SyncInfo& info() const = 0;
  /// Before a step's data and forward (a bounded-staleness parameter server
  /// makes step 0 wait its turn here).
  virtual void begin_step() {}
  /// Before backward.
  virtual void begin_backward() = 0;
  /// After backward: every parameter's .grad holds the gradient to apply (the
  /// mean over workers for synchronous strategies). Rethrows a communication
  /// failure (dlscale::PeerFailure); after one, no further collective is issued.
  virtual SyncStepStats end_backward() = 0;
  /// Applies the update; by default the local optimizer step.
  virtual void apply_update(torch::optim::Optimizer& optimizer) { optimizer.step(); }
  /// Collective over the workers, once after the last step: what servers
  /// did (worker 0 gets every shard's report; others and non-PS strategies
  /// get none).
  virtual std::vector<ShardReport> finish() { return {}; }
};

/// Where a parameter-server job's shards and workers are (--strategy ps).
struct PsLayout {
  comm::Communicator* comm = nullptr;  ///< workers and shards; point to point only
  std::vector<int> shard_ranks;        ///< rank in `comm` of each shard
  std::vector<int> worker_ranks;       ///< rank in `comm` of each worker
  int local_shard = -1;                ///< colocated: the shard this process hosts, else -1
};

/// What the parameter server needs besides the options.
struct PsSetup {
  PsLayout layout;
  OptimizerFactory make_optimizer;
  int64_t steps = 0;
  int64_t warmup = 0;
  std::chrono::milliseconds timeout{60000};  ///< the in-memory link's, without a communicator
};

/// Builds the strategy of `options` for `params` (registration order) over
/// `comm` (must outlive it; null for one worker, which gets no exchange).
/// Collective over `comm`: every rank calls it with the same options.
/// --strategy ps also needs `ps` (the worker's side of the job's layout).
std::unique_ptr<GradientSync> make_gradient_sync(const SyncOptions& options,
                                                 std::vector<torch::Tensor> params,
                                                 comm::Communicator* comm,
                                                 const PsSetup* ps = nullptr);

}  // namespace dlscale::dp
