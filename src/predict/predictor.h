#pragma once
// The scaling model (docs/predict.md): one step of N workers as a timeline
// at bucket granularity. Buckets become ready during backward at the
// calibrated times; their collectives run one after another on one
// communication stream, overlapping the rest of backward; the optimizer
// follows; what a strategy must do outside backward (ZeRO's all-gather)
// adds to the step. A synchronous parameter server's pushes, updates and
// pulls follow each bucket instead (ps_model.h). No LibTorch.
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "predict/collectives.h"
#include "predict/strategy_model.h"
#include "predict/workload.h"

namespace dlscale::predict {

struct PredictOptions {
  std::vector<long long> workers;  ///< the N to predict, each >= 1
  std::string scaling = "weak";    ///< weak (batch per worker fixed) | strong (global batch fixed)
  long long batch = 0;             ///< weak: per worker; strong: global; 0 = the workload's batch
  double first_bucket_mb = 1;      ///< bucket plan (as dlscale train, PyTorch DDP)
  double bucket_mb = 25;
  double input_samples_per_s = 0;  ///< one worker's input pipeline rate; 0 = never the limit
  int cores_per_node = 0;          ///< oversubscription: 0 = each worker has its own cores
  int shared_cores = 0;            ///< cores all workers share (an emulated cluster on one machine); 0 = none
  int threads_per_worker = 0;      ///< compute threads of a worker at calibration (with the cores); 0 = 1
  /// With shared_cores: the rate at which those cores move a rank's bytes
  /// through the kernel (the unshaped link's bandwidth). The bytes a rank
  /// sends then cost CPU time that backward loses; 0 = free.
  double copy_bytes_per_s = 0;
  /// The same for a 16-bit wire ([0] fp16, [1] bf16: wire16_index), whose
  /// summing costs the cores more per byte; 0 = copy_bytes_per_s.
  std::array<double, 2> wire16_copy_bytes_per_s{};
  /// The workload measured with every core busy (calibrate_busy_from_record),
  /// or null. A point computes at its speed where the workers that share
  /// cores (a node's, or all of them on shared_cores) number at least 2 and
  /// at least its side_by_side; elsewhere at the main workload's.
  std::shared_ptr<const Workload> busy;
};

/// A collective on the communication stream, ready at `ready_s` after backward starts.
struct Transfer {
  double ready_s = 0;
  Cost cost;
};

/// When the stream finishes `transfers`, run in order (each starts when it
/// is ready and the previous one is done), and their summed cost.
struct StreamResult {
  double end_s = 0;
  Cost busy;
};
StreamResult run_stream(const std::vector<Transfer>& transfers);

/// One predicted point.
struct StepPrediction {
  long long workers = 0;
  double batch_per_worker = 0;
  double step_s = 0;
  double compute_s = 0;        ///< data + forward + backward + optimizer, no exchange
  double exposed_comm_s = 0;   ///< the step's time beyond compute that communication adds
  double throughput = 0;       ///< global samples/s
  double speedup = 0;          ///< throughput / one worker's without exchange
  double efficiency_pct = 0;   ///< weak: t1/tN; strong: t1/(N·tN)
  double bytes_per_rank = 0;   ///< wire bytes the busiest rank sends per step
  std::string bottleneck;      ///< compute | input pipeline | latency | a link (intra-node, inter-node, ps-shard) | fp16 cast
};

/// A gradient bucket: its fp32 bytes and when its last gradient is ready.
struct Bucket {
  double bytes = 0;
  double ready_s = 0;
};

/// Buckets of `w`'s gradients as `dlscale train` cuts them (or one bucket
/// ready when backward ends, for a flat layout).
std::vector<Bucket> plan_workload_buckets(const Workload& w, bool flat, double first_bucket_mb, double bucket_mb);

/// The largest share of the gradient bytes one of `shards` PS shards holds
/// when tensors are placed as dlscale's PS places them (dp/ps_plan.h):
/// round-robin in registration order, or greedily (largest first onto the
/// least-loaded shard); whole tensors, or with `partition_mb` > 0 tensors
/// bigger than that split into near-equal pieces. 1/K when the order is
/// unknown.
double largest_shard_share(const Workload& w, long long shards, bool greedy, double partition_mb = 0);

/// Checks that `spec` can run on `workers` workers of `network` (ps shards
/// <= workers when colocated, hierarchical needs nodes of 2 or more);
/// throws dlscale::Error naming both.
void check_strategy(const StrategySpec& spec, const Network& network, long long workers);

/// largest_shard_share of one workload and PS strategy, kept per shard
/// count (a range of N asks for the same counts many times).
class ShardShares {
 public:
  ShardShares(const Workload& w, const StrategySpec& spec) : w_(w), spec_(spec) {}
  double operator()(long long shards);

 private:
  const Workload& w_;
  const StrategySpec& spec_;
  long long units_ = -1;              ///< pieces to place; more shards than this share alike
  std::map<long long, double> known_;
};

/// One step of `spec` on `workers` workers at `batch_per_worker`. `buckets`
/// from plan_workload_buckets with spec.flat; `shares`, when given, serves
/// the PS shard shares of this workload and spec.
StepPrediction predict_step(const Workload& w, const Network& network, const StrategySpec& spec,
                            const std::vector<Bucket>& buckets, long long workers, double batch_per_worker,
                            const PredictOptions& options, ShardShares* shares = nullptr);

struct StrategyPrediction {
  StrategySpec spec;
  std::vector<StepPrediction> points;  ///< one per options.workers, in order
};

struct Prediction {
  Workload workload;
  Network network;
  PredictOptions options;
  double t1_s = 0;  ///< one worker without exchange at the baseline batch
  std::vector<StrategyPrediction> strategies;
};

/// One step of `s` at each N of `o.workers`, each worker at
/// `batch_per_worker(N)` samples (no speedup or efficiency: they depend on
/// what the caller compares with). Throws dlscale::Error when `s` cannot
/// run at some N.
std::vector<StepPrediction> predict_steps(const Workload& w, const Network& n,
                                          const StrategySpec& s, const PredictOptions& o,
                                          const std::function<double(long long)>& batch_per_worker);

/// The fewest workers side by side at which `busy` (a busy calibration)
/// gives the compute: its own side_by_side, and at least 2.
long long busy_from_workers(const Workload& busy);

/// Whether a point of `workers` computes at `o.busy`'s speed (PredictOptions::busy).
bool computes_busy(const PredictOptions& o, const Network& n, long long workers);

/// One worker's step without exchange at `batch` samples.
double one_worker_step_s(const Workload& w, double batch);

/// Predicts every strategy at every N; throws dlscale::Error (naming it) on
/// an N <= 0, a strategy that cannot run at some N, a strong-scaling N
/// larger than the global batch, or an inconsistent network.
Prediction predict(const Workload& w, const Network& network, const std::vector<StrategySpec>& strategies,
                   const PredictOptions& options);

/// Parses "1,2,4", "1-64" (powers of two from 1 to 64), "1-100000:1"
/// (every N), "8-512:x2" (each N twice the last); throws dlscale::Error
/// naming the bad part.
std::vector<long long> parse_workers(const std::string& text);

}  // namespace dlscale::predict
