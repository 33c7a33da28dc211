#pragma once
// One parameter-server shard (docs/strategies.md, "Parameter server"): owns
// its variables' values and their optimizer state, and serves every worker
// over its own link. Per worker and step:
//   (bounded async only) receive a pull request, wait for the staleness gate;
//   send the current values (a pull; the first one before step 0);
//   receive the worker's gradient, one message per push bucket;
//   sync:  bucket by bucket (BytePS's pipelining): once all N workers'
//          bucket b is in, sum it in worker order, divide by N and apply the
//          optimizer to it, then send bucket b's new values to each worker,
//          while later buckets' pushes still arrive; the step's last bucket
//          makes the version + 1. On a step the noise scale measures
//          (--noise-every), send the worker the averaged gradient's squared
//          norm over the shard after its buckets (under Adam, also the sums
//          of P^2 g^2 over the averaged gradient and over the worker's own);
//   async: apply this worker's whole gradient on arrival (version + 1), and
//          record its staleness: the version now minus the version it was
//          computed on; its pulls are whole.
// The last pull of the run waits until every worker's last gradient is
// applied, so all workers end with the same values. A link thread per worker
// keeps a slow worker from holding up the others in async mode.
//
// Stale synchronous parallel (--max-staleness S): a worker's pull is
// answered only while, for every worker u holding values not yet answered by
// its gradient, (version - base_u) + in_flight <= S. Applying a gradient
// keeps that sum, so an applied gradient is never more than S versions
// stale, and with S = 0 one worker computes at a time (sequential SGD, no
// stale gradient). Workers pull shards in index order, so the gates of
// several shards cannot deadlock.
#include <torch/torch.h>

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "libtorch/comm/communicator.h"
#include "libtorch/dp/gradient_sync.h"
#include "dp/ps_plan.h"
#include "dp/ps_report.h"

namespace dlscale::dp {

/// Message tags between workers and shards; a push bucket b uses tag b.
inline constexpr uint32_t kPsValuesTag = 1u << 20;           ///< shard -> worker: a pull
inline constexpr uint32_t kPsInitTag = kPsValuesTag + 1;     ///< worker 0 -> shard: initial values
inline constexpr uint32_t kPsRequestTag = kPsValuesTag + 2;  ///< worker -> shard: pull request
inline constexpr uint32_t kPsReportTag = kPsValuesTag + 3;   ///< shard -> worker 0: its report
/// shard -> worker: three float64 over the shard, the averaged gradient's
/// squared norm and, under Adam, the sums of P^2 g^2 over the averaged
/// gradient and over this worker's (NaN without Adam's state)
inline constexpr uint32_t kPsNormTag = kPsValuesTag + 4;
inline constexpr int64_t kPsNormValues = 3;
/// shard -> worker, sync: bucket b's values (a pull, bucket by bucket).
inline uint32_t ps_pull_tag(size_t bucket) { return (2u << 20) + static_cast<uint32_t>(bucket); }

/// One end of a worker-shard link: a communicator and the peer's rank in it.
struct PsEndpoint {
  comm::Communicator* comm = nullptr;
  int peer = 0;
};

struct PsShardConfig {
  int shard = 0;
  PsShardPlan plan;
  std::vector<PsEndpoint> workers;  ///< worker w's end of the link, worker order
  int64_t steps = 0;
  int64_t warmup = 0;
  PsMode mode = PsMode::kSync;
  int max_staleness = -1;
  int64_t noise_every = 0;  ///< sync: steps between sending the averaged gradient's norm (0: never)
  OptimizerFactory make_optimizer;
  /// Called after each update with the new version (progress for a launcher).
  std::function<void(int64_t version)> on_update;
};

class PsShard {
 public:
  explicit PsShard(PsShardConfig config);
  /// Serves the whole run: takes the initial values from worker 0, serves
  /// every worker's steps, then sends worker 0 its report. Throws
  /// dlscale::PeerFailure naming "ps shard k" and the worker when a link fails.
  void run();
  /// The bytes, timings and staleness of a report, as sent to worker 0.
  static torch::Tensor encode(const ShardReport& report);
  static ShardReport decode(const torch::Tensor& data, int shard);

 private:
  void serve(int w);
  void serve_sync(int w);
  void grant(int w, bool last);
  std::unique_ptr<comm::Request> post_push_bucket(int w, size_t b);
  std::vector<std::unique_ptr<comm::Request>> post_push(int w);
  void count_step_bytes(int64_t step);
  void apply(int w, int64_t step);
  void apply_bucket(size_t b, int64_t step);
  bool measures(int64_t step) const;
  /// A measured step's parts of bucket b, whose average is `sum`.
  void measure_bucket(size_t b, const torch::Tensor& sum);
  void send_norm(int w);
  void step_bucket(size_t b, const torch::Tensor& grad);
  void updated();          // with mu_ held: one whole update (version + 1)
  bool gate_open() const;  // with mu_ held
  void wait(std::unique_lock<std::mutex>& lock, const std::function<bool()>& done,
            const char* what);
  void fail(int w, const std::string& what);

  PsShardConfig config_;
  const int workers_;
  const bool bounded_;
  torch::Tensor values_;                // the shard's variables, flat
  torch::Tensor grad_;                  // sync: the summed gradient
  std::vector<torch::Tensor> slots_;    // per worker: its last gradient
  std::vector<torch::Tensor> snapshots_;  // async: the values sent to each worker
  // Per push bucket: a view of values_ (a leaf that requires grad) and its
  // optimizer; the optimizers are elementwise, so a bucket at a time
  // computes what one optimizer over the whole shard would.
  std::vector<torch::Tensor> bucket_values_;
  std::vector<std::unique_ptr<torch::optim::Optimizer>> optimizers_;

  std::mutex mu_;
  std::condition_variable cv_;
  int64_t version_ = 0;
  std::vector<int> bucket_arrived_;     // sync: per bucket, workers' pushes in this round
  std::vector<int64_t> bucket_rounds_;  // sync: per bucket, rounds applied
  size_t buckets_applied_ = 0;          // sync: buckets of this round applied
  // sync, per bucket, this round's: the averaged gradient's squared norm,
  // and under Adam its sum of P^2 g^2 and each worker's own ([worker][bucket])
  std::vector<double> norm_parts_, weighted_parts_;
  std::vector<std::vector<double>> own_weighted_parts_;
  int finished_ = 0;         // workers whose last gradient is applied
  std::vector<int64_t> base_;      // per worker: the version it computes on
  std::vector<bool> in_flight_;    // per worker: holds values, gradient not yet applied
  std::string error_;
  ShardReport report_;
  double staleness_sum_ = 0;
};

}  // namespace dlscale::dp
