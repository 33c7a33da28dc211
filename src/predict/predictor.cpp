#include "predict/predictor.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "core/error.h"
#include "dp/bucket_plan.h"
#include "predict/ps_model.h"

namespace dlscale::predict {
namespace {

constexpr LinkKind kIntra = LinkKind::kIntra;
constexpr LinkKind kInter = LinkKind::kInter;

/// A ring over `ranks` workers on the flat link, through the fabric.
Cost flat_ring(Cost (*ring)(double, long long, const Link&, LinkKind), double bytes,
               const Network& n, long long ranks) {
  const Link& link = n.flat_link(ranks);
  return ring_over_fabric(ring(bytes, ranks, link, n.flat_kind(ranks)), link, n.fabric,
                          n.nodes(ranks));
}

/// The exchange of one bucket of `bytes` fp32 bytes during backward.
Cost bucket_cost(const StrategySpec& s, const Network& n, long long workers, double bytes, double share) {
  const double wire = bytes * s.wire_fraction();
  const Link& flat = n.flat_link(workers);
  const LinkKind name = n.flat_kind(workers);
  Cost c;
  const double cast = n.cast_rate(s.compress);
  if (cast > 0) c.cast_s = 2 * bytes / cast;  // down, then up
  switch (s.algorithm) {
    case Algorithm::kRing:
      return c.add(flat_ring(ring_allreduce, wire, n, workers));
    case Algorithm::kHalvingDoubling:
      return c.add(halving_doubling_allreduce(wire, workers, flat, name));
    case Algorithm::kTree:
      return c.add(tree_reduce(wire, workers, flat, name))
          .add(tree_broadcast(wire, workers, flat, name));
    case Algorithm::kHierarchical: {
      const long long local = std::min<long long>(workers, n.workers_per_node);
      const long long nodes = n.nodes(workers);
      const Cost across =
          ring_over_fabric(ring_allreduce(wire, nodes, n.inter, kInter), n.inter, n.fabric, nodes);
      return c.add(tree_reduce(wire, local, n.intra, kIntra))
          .add(across)
          .add(tree_broadcast(wire, local, n.intra, kIntra));
    }
    case Algorithm::kPs:
      return c.add(ps_legs(s, n, workers, wire, share).cost);
    case Algorithm::kZero:
      return c.add(flat_ring(ring_reduce_scatter, wire, n, workers));
  }
  return c;
}

/// Wire bytes the busiest rank sends per step for `total` fp32 gradient bytes.
double bytes_per_rank(const StrategySpec& s, const Network& n, long long workers, double total) {
  const double wire = total * s.wire_fraction();
  const double p = static_cast<double>(workers);
  if (workers <= 1 && s.algorithm != Algorithm::kPs) return 0;
  // The busiest rank of a tree sends up once and down to its children: rank
  // 1 has two from p = 5 (ranks 3, 4), rank 0 has two from p = 3.
  auto tree_node = [&](long long ranks) {
    return ranks >= 5 ? 3 * wire : ranks >= 3 ? 2 * wire : ranks == 2 ? wire : 0;
  };
  switch (s.algorithm) {
    case Algorithm::kRing:
    case Algorithm::kHalvingDoubling:
      return 2 * (p - 1) / p * wire;
    case Algorithm::kTree:
      return tree_node(workers);
    case Algorithm::kHierarchical: {
      const double m = static_cast<double>(n.nodes(workers));
      const long long local = std::min<long long>(workers, n.workers_per_node);
      return tree_node(local) + (m > 1 ? 2 * (m - 1) / m * wire : 0);
    }
    case Algorithm::kPs: {
      const double k = static_cast<double>(s.shards(n.nodes(workers)));
      if (s.ps_dedicated) return wire;
      if (s.node_aggregate) return wire + (static_cast<double>(n.nodes(workers)) - 1) * wire / k;
      return wire - wire / k + (p - 1) * wire / k;  // pushes to other shards, pulls its shard serves
    }
    case Algorithm::kZero:
      return (p - 1) / p * (wire + total);
  }
  return 0;
}

/// Wire bytes a rank sends per step on average over the workers: what the
/// cores they share move (the busiest rank's share is bytes_per_rank). The
/// ring, the tree (p − 1 messages up, p − 1 down), hierarchical (the same
/// counted tree by tree, plus the leaders' ring) and a colocated PS (each
/// worker's S less its own shard's part, up and back) all move 2(p − 1)·S
/// in all; a node-aggregating or dedicated PS and ZeRO as bytes_per_rank.
double mean_bytes_per_rank(const StrategySpec& s, const Network& n, long long workers,
                           double total) {
  const double p = static_cast<double>(workers);
  const double wire = total * s.wire_fraction();
  const bool colocated_ps = s.algorithm == Algorithm::kPs && !s.ps_dedicated && !s.node_aggregate;
  if (workers > 1 &&
      (s.algorithm == Algorithm::kTree || s.algorithm == Algorithm::kHierarchical || colocated_ps))
    return 2 * (p - 1) / p * wire;
  return bytes_per_rank(s, n, workers, total);
}

/// The bottleneck of a step whose exchanges cost `comm` in all.
std::string bottleneck(const StepPrediction& p, const Cost& comm, bool input_bound) {
  if (input_bound) return "input pipeline";
  if (p.exposed_comm_s <= 0.1 * p.step_s) return "compute";
  if (comm.latency_s >= comm.transfer_s + comm.cast_s) return "latency";
  if (comm.cast_s > comm.transfer_s) return "fp16 cast";
  return link_name(comm.busiest());
}

/// The compute of one step at `scale` × the calibrated batch, slowed by `slow`.
struct Compute {
  double data_s, forward_s, backward_s, optimizer_s;
};

Compute scaled(const Workload& w, double scale, double slow) {
  return {w.data_s * scale, w.forward_s * scale * slow, w.backward_s * scale * slow, w.optimizer_s * slow};
}

double slowdown(const PredictOptions& o, const Network& n, long long workers) {
  const double threads = std::max(1, o.threads_per_worker);
  double slow = 1;
  if (o.cores_per_node > 0) {
    const double local = static_cast<double>(std::min<long long>(workers, n.workers_per_node));
    slow = std::max(slow, local * threads / o.cores_per_node);
  }
  if (o.shared_cores > 0) slow = std::max(slow, static_cast<double>(workers) * threads / o.shared_cores);
  return slow;
}

/// On cores all workers share (one machine emulating a cluster), the CPU
/// time communication takes from compute: moving the `sent` bytes a rank
/// sends on average (mean_bytes_per_rank) at the cores' copy rate, and the
/// fp16/bf16 casts of every gradient.
double shared_core_comm_s(const StrategySpec& s, const Network& n, const PredictOptions& o, long long workers,
                          double total, double sent) {
  if (o.shared_cores <= 0 || workers <= 1) return 0;
  const int wire = wire16_index(s.compress);
  const double own = wire >= 0 ? o.wire16_copy_bytes_per_s[static_cast<size_t>(wire)] : 0;
  const double copy = own > 0 ? own : o.copy_bytes_per_s;
  double cpu = copy > 0 ? sent / copy : 0;
  const double cast = n.cast_rate(s.compress);
  if (cast > 0) cpu += 2 * total / cast;
  return cpu;
}

}  // namespace

StreamResult run_stream(const std::vector<Transfer>& transfers) {
  StreamResult r;
  for (const Transfer& t : transfers) {
    r.end_s = std::max(r.end_s, t.ready_s) + t.cost.total();
    r.busy.add(t.cost);
  }
  return r;
}

std::vector<Bucket> plan_workload_buckets(const Workload& w, bool flat, double first_bucket_mb, double bucket_mb) {
  if (flat) return {{static_cast<double>(w.param_bytes()), w.backward_s}};
  std::vector<int64_t> bytes;
  for (const Gradient& g : w.grads) bytes.push_back(g.bytes);
  std::vector<Bucket> buckets;
  for (const auto& items : dp::plan_buckets(bytes, first_bucket_mb, bucket_mb)) {
    Bucket b;
    for (size_t i : items) {
      b.bytes += static_cast<double>(w.grads[i].bytes);
      b.ready_s = std::max(b.ready_s, w.grads[i].ready_s);
    }
    buckets.push_back(b);
  }
  return buckets;
}

void check_strategy(const StrategySpec& s, const Network& n, long long workers) {
  DLSCALE_CHECK(workers >= 1, "the worker count must be >= 1 (got {})", workers);
  if (s.algorithm == Algorithm::kPs && !s.ps_dedicated) {
    const long long hosts = s.node_aggregate ? n.nodes(workers) : workers;
    const long long k = s.shards(n.nodes(workers));
    DLSCALE_CHECK(k <= hosts, "strategy '{}': {} colocated shards need at least {} {} (N = {} has {})", s.label, k, k,
                  s.node_aggregate ? "nodes" : "workers", workers, hosts);
  }
  DLSCALE_CHECK(s.algorithm != Algorithm::kHierarchical || n.workers_per_node >= 2,
                "strategy '{}': hierarchical needs 2 or more workers per node (the system has {})", s.label,
                n.workers_per_node);
  // The fabric term covers rings and a PS's all-to-all (docs/predict.md).
  const long long nodes = n.nodes(workers) + (s.ps_dedicated ? s.shards(n.nodes(workers)) : 0);
  const bool modelled = s.algorithm != Algorithm::kTree &&
                        s.algorithm != Algorithm::kHalvingDoubling &&
                        !(s.algorithm == Algorithm::kPs && s.ps_async);
  DLSCALE_CHECK(modelled || !n.fabric.spans(nodes),
                "strategy '{}': with a shared fabric only rings (allreduce, hierarchical, zero) "
                "and a synchronous ps are modelled; N = {} spans {} nodes, more than a group of {}",
                s.label, workers, nodes, n.fabric.nodes_per_group);
}

StepPrediction predict_step(const Workload& w, const Network& n, const StrategySpec& s,
                            const std::vector<Bucket>& buckets, long long workers, double batch_per_worker,
                            const PredictOptions& o, ShardShares* shares) {
  StepPrediction p;
  p.workers = workers;
  p.batch_per_worker = batch_per_worker;
  const double scale = batch_per_worker / static_cast<double>(w.batch);
  const double slow = slowdown(o, n, workers);
  Compute c = scaled(w, scale, slow);
  const double total = static_cast<double>(w.param_bytes());
  p.bytes_per_rank = bytes_per_rank(s, n, workers, total);
  // Cores the workers share also move their bytes and cast them: that CPU
  // time stretches backward (and the moments its buckets are ready).
  const double cpu_s =
      shared_core_comm_s(s, n, o, workers, total, mean_bytes_per_rank(s, n, workers, total)) * slow;
  const double stretch = c.backward_s > 0 ? (c.backward_s + cpu_s) / c.backward_s : 1;
  c.backward_s += cpu_s;
  const Network wire_net = n.for_wire(s.compress);  // a 16-bit wire's own rates
  Network stream_net = wire_net;
  if (o.shared_cores > 0) stream_net.set_cast_rate(0);  // the casts ran in backward
  double optimizer_s = c.optimizer_s;
  p.compute_s = c.data_s + c.forward_s + c.backward_s + c.optimizer_s;
  Cost comm;
  double step = 0;
  ShardShares own(w, s);
  const double share = s.algorithm == Algorithm::kPs ? (shares != nullptr ? *shares : own)(s.shards(n.nodes(workers)))
                                                     : 0;
  std::vector<Bucket> ready = buckets;  // ready times in this step's seconds
  for (Bucket& b : ready) b.ready_s *= scale * slow * stretch;
  if (s.algorithm == Algorithm::kPs && s.ps_async) {
    step = async_ps_step(s, wire_net, workers, total, share, p.compute_s, comm);
  } else if (s.algorithm == Algorithm::kPs && !s.ps_update_then_pull) {
    // The shards update, bucket by bucket: the busiest holds `share` of each.
    const StreamResult r =
        ps_pipeline(s, stream_net, workers, ready, share, c.optimizer_s * share / total);
    comm = r.busy;
    optimizer_s = 0;
    step = c.data_s + c.forward_s + std::max(c.backward_s, r.end_s);
  } else {
    std::vector<Transfer> stream;
    for (const Bucket& b : ready)
      stream.push_back({b.ready_s, bucket_cost(s, stream_net, workers, b.bytes, share)});
    const StreamResult r = run_stream(stream);
    comm = r.busy;
    Cost after;                         // outside backward: after the update
    if (s.algorithm == Algorithm::kPs)  // +update-then-pull: every variable, once updated
      after = ps_legs(s, wire_net, workers, total * s.wire_fraction(), share).cost;
    if (s.algorithm == Algorithm::kZero) {
      optimizer_s /= static_cast<double>(workers);
      for (const Bucket& b : buckets)
        after.add(flat_ring(ring_reduce_scatter, b.bytes, n, workers));
    }
    comm.add(after);
    step = c.data_s + c.forward_s + std::max(c.backward_s, r.end_s) + optimizer_s + after.total();
  }
  const double input_s = o.input_samples_per_s > 0 ? batch_per_worker / o.input_samples_per_s : 0;
  const bool input_bound = input_s > step;
  p.step_s = std::max(step, input_s);
  p.exposed_comm_s = std::max(0.0, step - (p.compute_s - c.optimizer_s + optimizer_s));
  p.throughput = batch_per_worker * static_cast<double>(workers) / p.step_s;
  p.bottleneck = bottleneck(p, comm, input_bound);
  return p;
}

}  // namespace dlscale::predict

namespace dlscale::predict {
namespace {

long long parse_count(const std::string& word, const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const long long v = word.empty() ? 0 : std::strtoll(word.c_str(), &end, 10);
  DLSCALE_CHECK(!word.empty() && *end == '\0' && errno == 0, "workers '{}': '{}' is not a whole number", text, word);
  DLSCALE_CHECK(v >= 1, "workers '{}': every N must be >= 1 (got {})", text, v);
  DLSCALE_CHECK(v <= 100'000'000, "workers '{}': N = {} is past 100,000,000", text, v);
  return v;
}

/// "A-B" (powers of two from A), "A-B:STEP" (every STEP), "A-B:xF" (× F).
void add_range(const std::string& part, const std::string& text, std::vector<long long>& out) {
  const size_t dash = part.find('-');
  const size_t colon = part.find(':');
  const long long lo = parse_count(part.substr(0, dash), text);
  const long long hi = parse_count(part.substr(dash + 1, colon == std::string::npos ? colon : colon - dash - 1), text);
  DLSCALE_CHECK(lo <= hi, "workers '{}': range {} runs backwards", text, part);
  const std::string step = colon == std::string::npos ? "x2" : part.substr(colon + 1);
  const bool times = !step.empty() && step[0] == 'x';
  const long long by = parse_count(times ? step.substr(1) : step, text);
  DLSCALE_CHECK(!times || by >= 2, "workers '{}': a factor must be >= 2", text);
  DLSCALE_CHECK((hi - lo) / (times ? 1 : by) < 1'000'000 || times, "workers '{}': more than 1,000,000 values", text);
  for (long long v = lo; v <= hi; v = times ? v * by : v + by) out.push_back(v);
}

}  // namespace

std::vector<long long> parse_workers(const std::string& text) {
  std::vector<long long> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const std::string part = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (part.find('-') != std::string::npos) {
      add_range(part, text, out);
    } else {
      out.push_back(parse_count(part, text));
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

double one_worker_step_s(const Workload& w, double batch) {
  const Compute c = scaled(w, batch / static_cast<double>(w.batch), 1);
  return c.data_s + c.forward_s + c.backward_s + c.optimizer_s;
}

namespace {

/// A busy workload must measure the main one's model and tensors.
void check_busy_workload(const Workload& w, const PredictOptions& o) {
  if (!o.busy) return;
  const Workload& b = *o.busy;
  DLSCALE_CHECK(
      b.model == w.model && b.grads.size() == w.grads.size() && b.param_bytes() == w.param_bytes(),
      "the busy calibration measured {} ({} gradient bytes in {} tensors), the "
      "calibration {} ({} in {}): give records of the same model and shape",
      b.model, b.param_bytes(), b.grads.size(), w.model, w.param_bytes(), w.grads.size());
}

}  // namespace

long long busy_from_workers(const Workload& busy) {
  return std::max<long long>(2, busy.side_by_side);
}

bool computes_busy(const PredictOptions& o, const Network& n, long long workers) {
  if (!o.busy) return false;
  const long long side_by_side =
      o.shared_cores > 0 ? workers : std::min<long long>(workers, n.workers_per_node);
  return side_by_side >= busy_from_workers(*o.busy);
}

std::vector<StepPrediction> predict_steps(
    const Workload& w, const Network& n, const StrategySpec& s, const PredictOptions& o,
    const std::function<double(long long)>& batch_per_worker) {
  for (long long workers : o.workers) check_strategy(s, n, workers);
  check_busy_workload(w, o);
  const std::vector<Bucket> buckets =
      plan_workload_buckets(w, s.flat, o.first_bucket_mb, o.bucket_mb);
  std::vector<Bucket> busy_buckets;
  if (o.busy) busy_buckets = plan_workload_buckets(*o.busy, s.flat, o.first_bucket_mb, o.bucket_mb);
  ShardShares shares(w, s);  // the same tensors in both workloads (checked above)
  std::vector<StepPrediction> points;
  points.reserve(o.workers.size());
  for (long long workers : o.workers) {
    const bool busy = computes_busy(o, n, workers);
    points.push_back(predict_step(busy ? *o.busy : w, n, s, busy ? busy_buckets : buckets, workers,
                                  batch_per_worker(workers), o, &shares));
  }
  return points;
}

Prediction predict(const Workload& w, const Network& n, const std::vector<StrategySpec>& strategies,
                   const PredictOptions& o) {
  DLSCALE_CHECK(o.scaling == "weak" || o.scaling == "strong", "scaling must be weak or strong (got '{}')", o.scaling);
  DLSCALE_CHECK(!o.workers.empty(), "no worker counts to predict");
  DLSCALE_CHECK(!strategies.empty(), "no strategies to predict");
  DLSCALE_CHECK(w.batch >= 1 && !w.grads.empty(), "the workload has no batch or no gradients");
  DLSCALE_CHECK(n.intra.bytes_per_s > 0 && n.inter.bytes_per_s > 0, "the network needs bandwidths > 0 on both levels");
  DLSCALE_CHECK(n.workers_per_node >= 1, "workers per node must be >= 1 (got {})", n.workers_per_node);
  DLSCALE_CHECK(o.batch >= 0, "the batch must be >= 1 (got {})", o.batch);
  Prediction result{w, n, o, 0, {}};
  const double batch = static_cast<double>(o.batch > 0 ? o.batch : w.batch);
  for (long long workers : o.workers) {
    DLSCALE_CHECK(workers >= 1, "every N must be >= 1 (got {})", workers);
    DLSCALE_CHECK(o.scaling == "weak" || static_cast<double>(workers) <= batch,
                  "strong scaling: N = {} workers exceed the global batch of {}", workers, batch);
  }
  result.t1_s = one_worker_step_s(w, batch);
  for (const StrategySpec& s : strategies) {
    StrategyPrediction sp{s, predict_steps(w, n, s, o, [&](long long workers) {
                            return o.scaling == "weak" ? batch
                                                       : batch / static_cast<double>(workers);
                          })};
    for (StepPrediction& p : sp.points) {
      p.speedup = p.throughput / (batch / result.t1_s);
      const double ideal =
          o.scaling == "weak" ? result.t1_s : result.t1_s / static_cast<double>(p.workers);
      p.efficiency_pct = 100.0 * ideal / p.step_s;
    }
    result.strategies.push_back(std::move(sp));
  }
  return result;
}

}  // namespace dlscale::predict
