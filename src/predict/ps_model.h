#pragma once
// The parameter server in the scaling model (docs/predict.md): the busiest
// shard's share, the legs of one push or pull, the synchronous exchange
// bucket by bucket, and the asynchronous step. No LibTorch.
#include <vector>

#include "predict/collectives.h"
#include "predict/predictor.h"
#include "predict/strategy_model.h"

namespace dlscale::predict {

/// One PS push of `bytes` (a pull has the same legs, each link's direction
/// reversed): how long it holds the busiest shard's link one way, a
/// worker's link the other way, and the fabric's uplink, each with its α;
/// and its cost as one message, the slowest leg (docs/predict.md).
struct PsLegs {
  Cost cost;
  double shard_s = 0, worker_s = 0, uplink_s = 0;
  bool colocated = true;  ///< the busiest shard's links are a worker's too
};

/// Moving `bytes` (one push, or one pull) between N workers and K shards,
/// the busiest shard holding `share` of every exchange.
PsLegs ps_legs(const StrategySpec& s, const Network& n, long long workers, double bytes,
               double share);

/// A synchronous PS's exchange of `buckets` (ready times in the step's
/// seconds), bucket by bucket; the shards apply a bucket in
/// `update_s_per_byte` × its fp32 bytes. When the last pull ends, and the
/// cost of every message.
StreamResult ps_pipeline(const StrategySpec& s, const Network& n, long long workers,
                         const std::vector<Bucket>& buckets, double share,
                         double update_s_per_byte);

/// The step of a parameter server whose workers never wait for each other;
/// `comm` gets what bounds it.
double async_ps_step(const StrategySpec& s, const Network& n, long long workers, double total,
                     double share, double compute_s, Cost& comm);

}  // namespace dlscale::predict
