#include "predict/ps_model.h"

#include <algorithm>
#include <array>
#include <limits>

#include "dp/ps_plan.h"

namespace dlscale::predict {
namespace {

/// One message each way carrying `shard_side` bytes on the busiest shard's
/// link or `worker_side` on a worker's, whichever is more.
Cost busiest(double shard_side, double worker_side, const Link& link, LinkKind worker_kind) {
  Cost c;
  c.latency_s = link.alpha_s;
  c.add_transfer(shard_side >= worker_side ? LinkKind::kShard : worker_kind,
                 std::max(shard_side, worker_side) / link.bytes_per_s);
  return c;
}

/// Each gradient's fp32 elements in registration order, where dlscale's PS
/// places them (dp/ps_plan.h); empty when the order is unknown.
std::vector<int64_t> registration_numels(const Workload& w) {
  bool known = !w.grads.empty();
  for (const Gradient& g : w.grads)
    known = known && g.index >= 0 && g.index < static_cast<int64_t>(w.grads.size());
  if (!known) return {};
  std::vector<int64_t> numels(w.grads.size(), 0);
  for (const Gradient& g : w.grads)
    numels[static_cast<size_t>(g.index)] = std::max<int64_t>(1, g.bytes / 4);
  return numels;
}

/// The legs of one message taking `shard_side` bytes into the busiest shard
/// and `worker_side` out of a worker, over `link`, through the fabric.
PsLegs legs(double shard_side, double worker_side, const Link& link, LinkKind worker_kind,
            double uplink, const Fabric& fabric) {
  PsLegs l;
  l.cost = with_uplink(busiest(shard_side, worker_side, link, worker_kind), uplink, fabric);
  // A side that sends nothing (the one shard's own worker) holds nothing.
  l.shard_s = shard_side > 0 ? link.alpha_s + shard_side / link.bytes_per_s : 0;
  l.worker_s = worker_side > 0 ? link.alpha_s + worker_side / link.bytes_per_s : 0;
  if (uplink > 0 && fabric.bytes_per_s > 0) l.uplink_s = link.alpha_s + uplink / fabric.bytes_per_s;
  return l;
}

}  // namespace

double largest_shard_share(const Workload& w, long long shards, bool greedy, double partition_mb) {
  if (shards <= 1) return 1;
  const std::vector<int64_t> numels = registration_numels(w);
  if (numels.empty()) return 1.0 / static_cast<double>(shards);
  // Shards beyond the units placed hold nothing.
  const dp::PsAssign assign = greedy ? dp::PsAssign::kGreedy : dp::PsAssign::kRoundRobin;
  const dp::PsPlan whole = dp::plan_ps(numels, 1, assign, partition_mb, 0, 0);
  if (shards >=
      static_cast<long long>(whole.pieces.size())) {  // a shard for each unit: the largest one
    int64_t largest = 0;
    for (const dp::PsPiece& piece : whole.pieces) largest = std::max(largest, piece.length);
    return static_cast<double>(largest) / static_cast<double>(whole.shards[0].elements);
  }
  const dp::PsPlan plan = dp::plan_ps(numels, static_cast<int>(shards), assign, partition_mb, 0, 0);
  int64_t total = 0, most = 0;
  for (const dp::PsShardPlan& shard : plan.shards) {
    total += shard.elements;
    most = std::max(most, shard.elements);
  }
  return total > 0 ? static_cast<double>(most) / static_cast<double>(total)
                   : 1.0 / static_cast<double>(shards);
}

double ShardShares::operator()(long long shards) {
  if (units_ < 0) {
    const std::vector<int64_t> numels = registration_numels(w_);
    units_ = numels.empty()
                 ? std::numeric_limits<long long>::max()
                 : static_cast<long long>(dp::plan_ps(numels, 1, dp::PsAssign::kRoundRobin,
                                                      spec_.ps_partition_mb, 0, 0)
                                              .pieces.size());
  }
  shards = std::min(shards, units_);
  const auto it = known_.find(shards);
  if (it != known_.end()) return it->second;
  return known_[shards] = largest_shard_share(w_, shards, spec_.ps_greedy, spec_.ps_partition_mb);
}

/// Moving `bytes` (one push, or one pull) between N workers and K shards,
/// the busiest shard holding `share` of every exchange. With a fabric, the
/// shards live as dlscale places them: colocated on ranks 0..K-1, dedicated
/// on nodes of their own before the workers' (docs/predict.md).
PsLegs ps_legs(const StrategySpec& s, const Network& n, long long workers, double bytes,
               double share) {
  const long long shards = s.shards(n.nodes(workers));
  const double k = static_cast<double>(shards);
  const long long per_node = std::max(1, n.workers_per_node);
  if (s.node_aggregate) {
    const long long local = std::min<long long>(workers, per_node);
    const long long nodes = n.nodes(workers);
    const double m = static_cast<double>(nodes);
    // The node's host takes the other local workers' gradients first, over
    // the intra link: every leg waits for it.
    Cost gather;
    gather.latency_s = n.intra.alpha_s;
    gather.add_transfer(LinkKind::kIntra,
                        static_cast<double>(local - 1) * bytes / n.intra.bytes_per_s);
    PsLegs l;
    if (m > 1) {
      const double uplink = all_to_all_uplink_bytes({0, 1, nodes}, {0, 1, shards}, bytes, n.fabric);
      l = legs((m - 1) * bytes * share, (k - 1) / k * bytes, n.inter, LinkKind::kInter, uplink,
               n.fabric);
    }
    const double gather_s = gather.total();
    l.cost = gather.add(l.cost);
    l.shard_s += gather_s;
    l.worker_s += gather_s;
    if (l.uplink_s > 0) l.uplink_s += gather_s;
    return l;
  }
  const double w = static_cast<double>(workers);
  if (s.ps_dedicated) {
    const double uplink =
        all_to_all_uplink_bytes({shards, per_node, workers}, {0, 1, shards}, bytes, n.fabric);
    PsLegs l = legs(w * bytes * share, bytes, n.inter, LinkKind::kInter, uplink, n.fabric);
    l.colocated = false;
    return l;
  }
  const double uplink =
      all_to_all_uplink_bytes({0, per_node, workers}, {0, per_node, shards}, bytes, n.fabric);
  return legs((w - 1) * bytes * share, (k - 1) / k * bytes, n.flat_link(workers),
              n.flat_kind(workers), uplink, n.fabric);
}

/// A synchronous PS's exchange, bucket by bucket as dlscale's shards serve
/// it (docs/strategies.md): bucket b's push leaves when backward has it
/// (after its casts); its pull when every worker's push of b is in and the
/// busiest shard has applied its share of b (`update_s_per_byte`). Each
/// direction of each link is a resource that one message holds at a time,
/// the uplink both ways: a push takes the shard's link in and a worker's
/// out, a pull the shard's out and a worker's in. Colocated, the shard's
/// links are a worker's, so pulls share each direction with the pushes
/// still going out; a dedicated shard's pulls overlap them.
StreamResult ps_pipeline(const StrategySpec& s, const Network& n, long long workers,
                         const std::vector<Bucket>& buckets, double share,
                         double update_s_per_byte) {
  enum { kShardIn, kShardOut, kWorkerIn, kWorkerOut, kUplink, kResources };
  std::array<double, kResources> free_at{};
  StreamResult r;
  // Holds the message's resources from when it is ready and they are free.
  auto send = [&](double ready, const PsLegs& l, bool pull) {
    const int worker_in = l.colocated ? kShardIn : kWorkerIn,
              worker_out = l.colocated ? kShardOut : kWorkerOut;
    const std::array<std::pair<int, double>, 3> held = {
        std::pair{pull ? kShardOut : kShardIn, l.shard_s},
        std::pair{pull ? worker_in : worker_out, l.worker_s},
        std::pair{static_cast<int>(kUplink), l.uplink_s}};
    double start = ready;
    for (const auto& [resource, s_held] : held)
      if (s_held > 0) start = std::max(start, free_at[static_cast<size_t>(resource)]);
    double end = start;
    for (const auto& [resource, s_held] : held) {
      if (s_held <= 0) continue;
      free_at[static_cast<size_t>(resource)] =
          std::max(free_at[static_cast<size_t>(resource)], start + s_held);
      end = std::max(end, start + s_held);
    }
    r.busy.add(l.cost);
    return end;
  };
  struct Pull {
    double ready_s;
    PsLegs legs;  // its push's, each link's direction reversed
    bool sent;
  };
  std::vector<Pull> pulls;  // in push order
  auto pull_ready_by = [&](double t) {
    for (Pull& p : pulls)
      if (!p.sent && p.ready_s <= t) {
        r.end_s = std::max(r.end_s, send(p.ready_s, p.legs, true));
        p.sent = true;
      }
  };
  const double cast = n.cast_rate(s.compress);
  for (const Bucket& b : buckets) {  // ready times in this step's seconds
    const double wire = b.bytes * s.wire_fraction();
    const double cast_s = cast > 0 ? 2 * b.bytes / cast : 0;  // down, then up
    pull_ready_by(b.ready_s + cast_s);  // a pull ready first goes first on the links they share
    const PsLegs legs = ps_legs(s, n, workers, wire, share);
    const double pushed = send(b.ready_s + cast_s, legs, false);
    r.busy.cast_s += cast_s;
    pulls.push_back({pushed + update_s_per_byte * b.bytes, legs, false});
  }
  pull_ready_by(std::numeric_limits<double>::infinity());
  return r;
}

/// A parameter server whose workers never wait for each other: each worker
/// computes, pushes and pulls alone, and the shards' links cap the rate.
double async_ps_step(const StrategySpec& s, const Network& n, long long workers, double total,
                     double share, double compute_s, Cost& comm) {
  const double wire = total * s.wire_fraction();
  const Link& link = s.ps_dedicated ? n.inter : n.flat_link(workers);
  Cost own;
  own.latency_s = 2 * link.alpha_s;
  own.add_transfer(s.ps_dedicated ? LinkKind::kInter : n.flat_kind(workers),
                   2 * wire / link.bytes_per_s);
  const double shard_load =
      static_cast<double>(s.ps_dedicated ? workers : workers - 1) * wire * share;
  const double server_s = link.alpha_s + shard_load / link.bytes_per_s;
  comm = own;
  if (server_s > compute_s + own.total()) comm = busiest(shard_load, 0, link, LinkKind::kShard);
  return std::max(compute_s + own.total(), server_s);
}

}  // namespace dlscale::predict
