#pragma once
// The gradient-synchronisation seam (docs/strategies.md): a worker's side
// of a strategy (libtorch/dp/strategy.h makes it). The trainer holds one GradientSync
// and names no strategy: it calls begin_backward() before backward,
// end_backward() after it (the wait there is the exposed communication),
// apply_update() for the optimizer step, which a strategy may own (a
// parameter-server shard, say), and report() at the end.
#include <torch/torch.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "dp/sync_options.h"
#include "libtorch/comm/communicator.h"
#include "libtorch/dp/grad_clip.h"
#include "libtorch/models/units.h"

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
  std::string strategy;                ///< allreduce | tree | hierarchical | independent | ps
  std::string layout;                  ///< bucketed | flat | none
  std::string wire_dtype = "float32";  ///< float32 | float16 | bfloat16
  /// How gradients travel: "collectives" (all ranks together), "pushes" (to
  /// servers, values pulled back) or "none".
  std::string exchange = "collectives";
  /// Data moves even with one worker (to and from servers).
  bool exchanges_alone = false;
  std::vector<int64_t> bucket_bytes;   ///< wire bytes of each bucket, in launch order
  double formula_bytes_sent = 0;       ///< bytes this rank sends per step, by the formula
  std::string formula;                 ///< that formula as text (S = bytes per step)
  /// busbw = algbw × this over the collectives' busy time; 0 = the ring
  /// allreduce's 2(p−1)/p (nccl-tests' factors).
  double bus_factor = 0;
  bool keeps_replicas_identical = true;
  int nodes = 0;  ///< hierarchical: node groups; 0 otherwise
  /// Lines the run's console header shows for the strategy (its layout).
  std::vector<std::string> header;
};

/// A span of the trace (Chrome trace "X" event), monotonic seconds.
struct TraceSpan {
  std::string name;
  std::string track;
  double start = 0;
  double end = 0;
};

/// What a strategy adds to a run's outcome (on worker 0; others get the
/// same key and what they know).
struct StrategyReport {
  std::string key;          ///< the record's results.<key>; "" = no section
  nlohmann::json section;   ///< that section
  std::vector<std::string> summary;  ///< console lines after the communication summary
  std::vector<TraceSpan> spans;      ///< the trace's spans of servers
};

/// What a rank keeps of parameters and gradients between steps, in bytes
/// (docs/metrics.md, "Memory"); -1 where the model's own tensors hold them
/// and the trainer counts them (one full copy per parameter).
struct HeldBytes {
  int64_t params = -1;
  int64_t grads = -1;
};

/// What an optimizer over segments of the model's tensors (--strategy zero)
/// needs for whole-tensor quantities, such as LARS's norms.
struct TensorSegments {
  /// Per optimizer parameter, in the order given: the model tensor
  /// (registration index) it is a segment of.
  std::vector<int64_t> tensor_of;
  int64_t tensors = 0;  ///< the model's tensors
  /// Collective over the workers: sums a float32 tensor elementwise. Every
  /// worker calls it equally often (once per step where it is used).
  std::function<void(torch::Tensor&)> sum_over_workers;
};

/// Builds an optimizer over the given tensors (a shard owns its variables'
/// optimizer); `segments` is null unless they are segments of tensors.
using OptimizerFactory = std::function<std::unique_ptr<torch::optim::Optimizer>(
    std::vector<torch::Tensor>, const TensorSegments* segments)>;

class GradientSync {
 public:
  virtual ~GradientSync() = default;
  virtual const SyncInfo& info() const = 0;
  /// Before a step's data and forward (a bounded-staleness parameter server
  /// makes step 0 wait its turn here).
  virtual void begin_step() {}
  /// Before the model's parameters are read: a step's forward, an
  /// evaluation, the end of the run. A strategy that frees them between
  /// steps (zero stage 3) gathers them here; they stay whole until its next
  /// end_backward().
  virtual void need_parameters() {}
  /// Before backward.
  virtual void begin_backward() = 0;
  /// --accumulate: the backward passes of a step's micro-batches but the
  /// last run between begin_local_backward() and end_local_backward(). Their
  /// gradients stay on this rank (autograd sums them in .grad) and nothing
  /// is exchanged: a strategy's gradient hooks ask local_backward() and do
  /// nothing. The last micro-batch's backward runs between begin_backward()
  /// and end_backward() with the whole step's gradient (libtorch/train/accumulate.h).
  virtual void begin_local_backward() { local_ = true; }
  virtual void end_local_backward() { local_ = false; }
  /// After backward: every parameter's .grad holds the gradient to apply (the
  /// mean over workers for synchronous strategies). Rethrows a communication
  /// failure (dlscale::PeerFailure); after one, no further collective is issued.
  virtual SyncStepStats end_backward() = 0;
  /// --clip-grad-norm, after end_backward(): scales the gradients this
  /// worker applies so that the global norm is at most `max_norm`; returns
  /// the norm before. By default every .grad of `params` (the workers'
  /// average, or the worker's own with independent workers).
  virtual double clip_gradients(const std::vector<torch::Tensor>& params, double max_norm) {
    std::vector<torch::Tensor> grads;
    for (const auto& p : params) grads.push_back(p.grad());
    return clip_grad_norm(grads, max_norm);
  }
  /// --noise-scale, after end_backward(): the squared L2 norm of the
  /// workers' averaged gradient, which the update applies (collective where
  /// the strategy shards it; squared_norm's fast sum); NaN where no worker
  /// holds that average (ps: the servers do).
  virtual double averaged_gradient_sq_norm(const std::vector<torch::Tensor>& params) {
    std::vector<torch::Tensor> grads;
    for (const auto& p : params) grads.push_back(p.grad());
    return squared_norm(grads, nullptr, false);
  }
  /// Where Adam's state is on servers (ps, sync mode): after
  /// averaged_gradient_sq_norm() on a measured step, the sums of P^2 g^2
  /// they took over the averaged gradient and over this worker's own
  /// (NaN before their first update, or without Adam). None elsewhere.
  struct ServedWeighted {
    double averaged = 0;
    double own = 0;
  };
  virtual std::optional<ServedWeighted> served_weighted_sq() const { return std::nullopt; }
  /// Applies the update; by default the local optimizer step.
  virtual void apply_update(torch::optim::Optimizer& optimizer) { optimizer.step(); }
  /// Collective over the workers, once after the last step: the strategy's
  /// section of the record, console lines and trace spans.
  virtual StrategyReport report() { return {}; }
  /// The parameter and gradient memory this strategy keeps on this rank.
  virtual HeldBytes held_bytes() const { return {}; }
  /// The optimizer whose state this rank keeps when the strategy owns the
  /// update on this rank (a shard of it); null: the trainer's optimizer.
  virtual const torch::optim::Optimizer* own_optimizer() const { return nullptr; }
  /// own_optimizer()'s parameters in the strategy's order (zero: the pieces
  /// of the model's tensors in this rank's chunks); empty without one.
  virtual std::vector<torch::Tensor> own_parameters() const { return {}; }
  /// --noise-scale under Adam where own_optimizer() keeps a shard of the
  /// state (docs/convergence.md, "The noise scale Adam sees"): `pieces`, one
  /// tensor per own_parameters() entry and of its shape, put together over
  /// the workers into one tensor per parameter the sync was made with, of
  /// its shape and strides. A collective: every worker calls it at the same
  /// step. Empty where the strategy keeps no shard (the default).
  virtual std::vector<torch::Tensor> assemble_pieces(const std::vector<torch::Tensor>& /*pieces*/) {
    return {};
  }

 protected:
  /// Inside a local backward pass (--accumulate): gradient hooks do nothing.
  bool local_backward() const { return local_.load(std::memory_order_relaxed); }

 private:
  std::atomic<bool> local_{false};  // a GPU's backward runs hooks on autograd's own thread
};

/// What a worker's GradientSync needs besides the parameters.
/// Whether `step` is one that measures the gradient noise scale, `every`
/// steps apart (--noise-every; 0: none): the trainer's probe, the parameter
/// server's workers and its shards must pick the same steps.
inline bool measures_noise(int64_t step, int64_t every) {
  return every > 0 && step >= 0 && step % every == 0;
}

struct SyncContext {
  comm::Communicator* comm = nullptr;  ///< the workers; must outlive the sync; null for one worker
  std::string node_name;               ///< ranks with equal names share a node (hierarchical)
  OptimizerFactory make_optimizer;     ///< for a strategy that owns the update
  int64_t steps = 0;                   ///< the run's steps, warm-up included
  int64_t warmup = 0;
  int64_t noise_every = 0;                   ///< steps between noise-scale measurements (0: none)
  std::chrono::milliseconds timeout{60000};  ///< links without a communicator
  /// The model's units (libtorch/models/units.h) in forward order, each as indices
  /// into the parameters; a parameter in no unit (or shared by two) is in
  /// none. Empty when the model declares none.
  std::vector<std::vector<size_t>> units;
  /// Tells the model whom to report its units' forward to (null: nobody).
  std::function<void(models::UnitObserver*)> observe_units;
  /// Indices of the parameters whose gradients are sparse (--sparse-embeddings).
  std::vector<size_t> sparse;
};

}  // namespace dlscale::dp
