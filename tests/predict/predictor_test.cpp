// The scaling model's formulas and timeline (predict/), each against a
// number computed by hand from docs/predict.md.
#include "predict/predictor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <vector>

#include "core/error.h"
#include "core/files.h"
#include "dp/sync_options.h"
#include "predict/predict_report.h"
#include "predict/system_file.h"
#include "process_util.h"

namespace dlscale::predict {
namespace {

constexpr double kTol = 1e-12;

Link link(double alpha_s, double bytes_per_s) { return {alpha_s, bytes_per_s}; }

/// Expects `fn` to throw a dlscale::Error whose message contains `needle`;
/// `input` names what was given, for the failure's message.
template <typename Fn>
void expect_refused(Fn&& fn, const std::string& input, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << input << " was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(PredictFormulas, RingHalvingDoublingTreeAndReduceScatterCostWhatTheirFormulasSay) {
  const Link l = link(1e-5, 1e9);
  const double s = 1e6;
  // Ring over 4: 2(p-1) messages, 2(p-1)/p x S.
  Cost c = ring_allreduce(s, 4, l, LinkKind::kInter);
  EXPECT_NEAR(c.latency_s, 6e-5, kTol);
  EXPECT_NEAR(c.transfer_s, 1.5e-3, kTol);
  EXPECT_EQ(c.busiest(), LinkKind::kInter);
  EXPECT_DOUBLE_EQ(c.transfer_by[1], c.transfer_s);
  EXPECT_DOUBLE_EQ(ring_allreduce(s, 1, l, LinkKind::kInter).total(), 0.0);
  // Halving-doubling over 8: 2 log2 8 = 6 messages, the same bytes as the ring.
  c = halving_doubling_allreduce(s, 8, l, LinkKind::kInter);
  EXPECT_NEAR(c.latency_s, 6e-5, kTol);
  EXPECT_NEAR(c.transfer_s, 2 * 7.0 / 8 * 1e-3, kTol);
  // Over 5 ranks: ceil(log2 5) = 3 rounds each way.
  EXPECT_NEAR(halving_doubling_allreduce(s, 5, l, LinkKind::kInter).latency_s, 6e-5, kTol);
  // The binary tree over 4 ranks: rank 0 takes 2 while rank 1 takes 3, then
  // 1 (2 slots of S up); down, 0 sends to 1 and 2 at once (both after 2
  // slots), then 1 to 3 (3 slots).
  const double slot = 1e-5 + 1e-3;
  EXPECT_NEAR(tree_reduce(s, 2, l, LinkKind::kInter).total(), slot, kTol);
  EXPECT_NEAR(tree_broadcast(s, 2, l, LinkKind::kInter).total(), slot, kTol);
  EXPECT_NEAR(tree_reduce(s, 4, l, LinkKind::kInter).total(), 2 * slot, kTol);
  EXPECT_NEAR(tree_broadcast(s, 4, l, LinkKind::kInter).total(), 3 * slot, kTol);
  // 7 ranks: 1 and 2 each take two leaves (2 slots), then 0 takes both (4);
  // down 2 + 2.
  EXPECT_NEAR(tree_reduce(s, 7, l, LinkKind::kInter).total(), 4 * slot, kTol);
  EXPECT_NEAR(tree_broadcast(s, 7, l, LinkKind::kInter).total(), 4 * slot, kTol);
  // 5 ranks: 3 and 4 under 1, which is ready after 2 slots, while 0 takes 2
  // in its first: 0 has both after 3. Down: 0 → {1, 2} 2, 1 → {3, 4} 2.
  EXPECT_NEAR(tree_reduce(s, 5, l, LinkKind::kInter).total(), 3 * slot, kTol);
  EXPECT_NEAR(tree_broadcast(s, 5, l, LinkKind::kInter).total(), 4 * slot, kTol);
  EXPECT_DOUBLE_EQ(tree_reduce(s, 1, l, LinkKind::kInter).total(), 0.0);
  EXPECT_DOUBLE_EQ(tree_broadcast(s, 1, l, LinkKind::kInter).total(), 0.0);
  // A perfect tree of 2^27 - 1 ranks (26 levels below the root), computed
  // subtree by subtree: 2 slots a level each way.
  EXPECT_NEAR(tree_reduce(s, (1LL << 27) - 1, l, LinkKind::kInter).total(), 52 * slot, kTol);
  EXPECT_NEAR(tree_broadcast(s, (1LL << 27) - 1, l, LinkKind::kInter).total(), 52 * slot, kTol);
  // A link whose one direction alone moves twice what both at once do (the
  // CPU as the link: loopback): the tree's messages go one way at a time,
  // at that rate; the ring's go both ways at once and keep B.
  Link cpu = l;
  cpu.one_way_bytes_per_s = 2 * l.bytes_per_s;
  EXPECT_NEAR(tree_reduce(s, 4, cpu, LinkKind::kInter).total(), 2 * (1e-5 + 0.5e-3), kTol);
  EXPECT_NEAR(tree_broadcast(s, 4, cpu, LinkKind::kInter).total(), 3 * (1e-5 + 0.5e-3), kTol);
  EXPECT_DOUBLE_EQ(ring_allreduce(s, 4, cpu, LinkKind::kInter).total(),
                   ring_allreduce(s, 4, l, LinkKind::kInter).total());
  // A slower one-way figure (noise) never slows the tree; a rate set anew
  // (a shaped link, --link-gbps) is both directions' and clears it.
  cpu.one_way_bytes_per_s = 0.5 * l.bytes_per_s;
  EXPECT_NEAR(tree_reduce(s, 4, cpu, LinkKind::kInter).total(), 2 * slot, kTol);
  cpu.one_way_bytes_per_s = 2 * l.bytes_per_s;
  cpu.set_rate(l.bytes_per_s);
  EXPECT_EQ(cpu.one_way_bytes_per_s, 0);
  // Reduce-scatter over 4: 3 messages of S/4.
  c = ring_reduce_scatter(s, 4, l, LinkKind::kInter);
  EXPECT_NEAR(c.latency_s, 3e-5, kTol);
  EXPECT_NEAR(c.transfer_s, 0.75e-3, kTol);
}

TEST(PredictFormulas, TheStreamRunsCollectivesInOrderEachStartingWhenReadyAndThePreviousIsDone) {
  auto cost = [](double s) {
    Cost c;
    c.add_transfer(LinkKind::kIntra, s);
    return c;
  };
  // Ready at 1, 2, 10 ms, costing 3, 1, 2 ms: 1+3 = 4; max(4, 2)+1 = 5; max(5, 10)+2 = 12.
  const StreamResult r = run_stream({{1e-3, cost(3e-3)}, {2e-3, cost(1e-3)}, {10e-3, cost(2e-3)}});
  EXPECT_NEAR(r.end_s, 12e-3, kTol);
  EXPECT_NEAR(r.busy.transfer_s, 6e-3, kTol);
  EXPECT_DOUBLE_EQ(run_stream({}).end_s, 0.0);
}

/// forward 10 ms, backward 20 ms, optimizer 2 ms at batch 8; a 4 MB tensor
/// ready 5 ms into backward, then an 8 MB one at its end.
Workload two_tensors() {
  Workload w;
  w.model = "toy";
  w.batch = 8;
  w.forward_s = 10e-3;
  w.backward_s = 20e-3;
  w.optimizer_s = 2e-3;
  w.grads = {{4'000'000, 5e-3}, {8'000'000, 20e-3}};
  return w;
}

Network one_node(int per_node = 8) {
  Network n;
  n.intra = link(1e-5, 1e9);
  n.inter = link(1e-4, 1e8);
  n.workers_per_node = per_node;
  return n;
}

StepPrediction step(const std::string& strategy, long long workers, const Network& n = one_node(),
                    double batch = 8) {
  const StrategySpec s = parse_strategy(strategy);
  const Workload w = two_tensors();
  PredictOptions o;
  const auto buckets = plan_workload_buckets(w, s.flat, o.first_bucket_mb, o.bucket_mb);
  return predict_step(w, n, s, buckets, workers, batch, o);
}

TEST(PredictStep, BucketedRingOverlapsBackwardAndTheLastBucketIsExposed) {
  // Buckets: [4 MB] (reaches the 1 MiB first cap), [8 MB]. Ring over 4 on
  // one node: 6 alpha + 1.5 S/B. Bucket 1: ready 5 ms, costs 6.06 ms, ends
  // 11.06; bucket 2: ready 20 ms, costs 12.06 ms, ends 32.06 ms.
  const StepPrediction p = step("allreduce", 4);
  EXPECT_NEAR(p.step_s, 10e-3 + 32.06e-3 + 2e-3, 1e-12);
  EXPECT_NEAR(p.exposed_comm_s, 12.06e-3, 1e-12);
  EXPECT_NEAR(p.compute_s, 32e-3, 1e-12);
  EXPECT_NEAR(p.throughput, 32 / p.step_s, 1e-9);
  EXPECT_NEAR(p.bytes_per_rank, 1.5 * 12e6, 1e-6);
  EXPECT_EQ(p.bottleneck, "intra-node link");
  // Flat: one 12 MB bucket when backward ends: 20 + 6e-5 + 18 ms.
  EXPECT_NEAR(step("allreduce+flat", 4).step_s, 10e-3 + 20e-3 + 18.06e-3 + 2e-3, 1e-12);
  // One worker: nothing to exchange.
  const StepPrediction one = step("allreduce", 1);
  EXPECT_NEAR(one.step_s, 32e-3, 1e-12);
  EXPECT_EQ(one.bottleneck, "compute");
}

TEST(PredictStep, AcrossNodesTheInterNodeLinkBindsAndHierarchicalSplitsTheLevels) {
  // 16 workers, 8 per node: the ring's steps cross the 0.1 GB/s links.
  // Flat: 30 alpha = 3 ms + 2 x 15/16 x 12 MB / 1e8 = 225 ms.
  EXPECT_NEAR(step("allreduce+flat", 16).step_s, 10e-3 + 20e-3 + 3e-3 + 225e-3 + 2e-3, 1e-12);
  // Hierarchical, flat: tree in the node (8 ranks: 4 slots up, 5 down) on
  // the intra link, ring over 2 leaders on the inter link.
  const double slot = 1e-5 + 12e6 / 1e9;
  const double leaders = 2 * 1e-4 + 12e6 / 1e8;
  const StepPrediction h = step("hierarchical+flat", 16);
  EXPECT_NEAR(h.step_s, 10e-3 + 20e-3 + 9 * slot + leaders + 2e-3, 1e-12);
  // 32 workers: 4 leaders carry 2 x 3/4 x 120 ms = 180 ms, more than the
  // 120 ms inside the nodes.
  EXPECT_EQ(step("hierarchical+flat", 32).bottleneck, "inter-node link");
  // Tree over all 16 across nodes: up, the subtrees of 8 and 7 are ready
  // after 4 slots and 0 takes both (6); down 2 + 2 + 2 + 1 = 7.
  EXPECT_NEAR(step("tree+flat", 16).step_s, 10e-3 + 20e-3 + 13 * (1e-4 + 12e6 / 1e8) + 2e-3, 1e-12);
  // The busiest rank sends up once and down to each child: 1 has 3 and 4
  // from p = 5 (3 S); below that 0 (or 1) sends 2 S, and 1 S at p = 2.
  EXPECT_NEAR(step("tree", 2).bytes_per_rank, 12e6, 1e-6);
  EXPECT_NEAR(step("tree", 4).bytes_per_rank, 2 * 12e6, 1e-6);
  EXPECT_NEAR(step("tree", 5).bytes_per_rank, 3 * 12e6, 1e-6);
  // Hierarchical, 4 a node on 2 nodes: the node's tree and the leaders' ring.
  EXPECT_NEAR(step("hierarchical", 8, one_node(4)).bytes_per_rank, 2 * 12e6 + 12e6, 1e-6);
  // Halving-doubling over 16: 8 alpha.
  EXPECT_NEAR(step("allreduce-hd+flat", 16).step_s, 10e-3 + 20e-3 + 8e-4 + 225e-3 + 2e-3, 1e-12);
}

TEST(PredictStep, AParameterServerPushesDuringBackwardAndPullsEachBucketAfterItsUpdate) {
  // ps:2 colocated, 4 workers on one node: a push of S holds the busiest
  // shard's link in for (N-1) S/K = 1.5 S (one alpha) and its link out, a
  // worker's, for (K-1)/K S = S/2; a pull the other way round. Bucket 1
  // (4 MB): in 5 -> 11.01, out 5 -> 7.01; the shard applies its half of it,
  // 2 ms x 0.5 x 4/12 = 0.333 ms, and its pull holds out 11.343 -> 17.353
  // and in -> 13.353. Bucket 2 (8 MB, ready at 20): in -> 32.01, out ->
  // 24.01; update 0.667 ms; pull out 32.677 -> 44.687.
  const StepPrediction p = step("ps:2", 4);
  EXPECT_NEAR(p.step_s, 10e-3 + 32.01e-3 + 2e-3 * 0.5 * 8 / 12 + 12.01e-3, 1e-12);
  // ps:1: the shard's own worker sends nothing, so pushes hold its link in
  // and pulls its link out, and pull 1 (ready at 5 + 12.01 + 0.667 ms) goes
  // out while push 2 comes in (20 -> 44.01); pull 2 follows its update.
  EXPECT_NEAR(step("ps:1", 4).step_s, 10e-3 + 20e-3 + 24.01e-3 + 2e-3 * 8 / 12 + 24.01e-3, 1e-12);
  EXPECT_EQ(p.bottleneck, "ps-shard link");
  // Pushes to the other shard (S/2) plus the pulls its shard serves (3 S/2).
  EXPECT_NEAR(p.bytes_per_rank, 12e6 - 6e6 + 3 * 6e6, 1e-6);
  // Dedicated: the shard's link takes N S/K = 2 S in over the inter link,
  // and its pulls go out while later pushes come in. Push 1 holds it 5 ->
  // 85.1, push 2 85.1 -> 245.2; pull 1 goes out at 85.43, pull 2 at 245.87
  // after its update, for 160.1 ms.
  const StepPrediction d = step("ps:2+dedicated", 4);
  const double push1 = 1e-4 + 8e6 / 1e8, push2 = 1e-4 + 16e6 / 1e8;
  EXPECT_NEAR(d.step_s, 10e-3 + (5e-3 + push1 + push2) + 2e-3 * 0.5 * 8 / 12 + push2, 1e-12);
  // +update-then-pull (TensorFlow's synchronous PS): the shards update once
  // every push is in (2 ms), then the workers pull all 12 MB: 0.01 + 18 ms
  // colocated, 0.1 + 240 ms from the dedicated shards.
  EXPECT_NEAR(step("ps:2+update-then-pull", 4).step_s, 10e-3 + 32.01e-3 + 2e-3 + 18.01e-3, 1e-12);
  EXPECT_NEAR(step("ps:2+dedicated+update-then-pull", 4).step_s,
              10e-3 + (5e-3 + push1 + push2) + 2e-3 + (1e-4 + 24e6 / 1e8), 1e-12);
  // Async: each worker computes, pushes and pulls alone (2 alpha + 2 S/B on its link)
  // unless the shards' links cap the rate ((N-1) S/K per step).
  const StepPrediction a = step("ps:2+async", 4);
  EXPECT_NEAR(a.step_s, 32e-3 + 2e-5 + 24e-3, 1e-12);
}

TEST(PredictStep, NodeAggregationSumsInsideEachNodeThenPushesToOneShardPerNode) {
  // 16 workers, 8 per node, ps:node: 2 shards. Inside a node the host takes
  // 7 S over the intra link; between nodes the busiest shard takes
  // (M-1) S/K = S/2, a worker node sends (K-1)/K S = S/2.
  const StepPrediction p = step("ps:node+node-aggregate+flat", 16);
  // One bucket (flat): its pull follows the shard's update of its half.
  const double one_way = (1e-5 + 7 * 12e6 / 1e9) + (1e-4 + 6e6 / 1e8);
  EXPECT_NEAR(p.step_s, 10e-3 + 20e-3 + one_way + 2e-3 * 0.5 + one_way, 1e-12);
}

TEST(PredictStep, ZeroReduceScattersDuringBackwardShardsTheUpdateAndGathersAfter) {
  // 4 workers: bucket 1 RS: 3 alpha + 0.75 x 4 MB / B = 3.03 ms (ends 8.03);
  // bucket 2: 3 alpha + 6 ms, from 20 to 26.03. Optimizer 2/4 ms. All-gather
  // per bucket: 3.03 + 6.03 ms.
  const StepPrediction p = step("zero:2", 4);
  EXPECT_NEAR(p.step_s, 10e-3 + 26.03e-3 + 0.5e-3 + 9.06e-3, 1e-12);
  EXPECT_NEAR(p.bytes_per_rank, 0.75 * 24e6, 1e-6);
}

TEST(PredictStep, CompressionHalvesTheWireAndPaysTheCasts) {
  Network n = one_node();
  n.cast_bytes_per_s = 4e9;
  // Flat, 4 workers: 6 alpha + 1.5 x 6 MB / 1e9 = 9.06 ms, casts 2 x 12 MB / 4e9 = 6 ms.
  const StepPrediction p = step("allreduce+flat+fp16", 4, n);
  EXPECT_NEAR(p.step_s, 10e-3 + 20e-3 + 9.06e-3 + 6e-3 + 2e-3, 1e-12);
  EXPECT_NEAR(p.bytes_per_rank, 1.5 * 6e6, 1e-6);
}

TEST(PredictStep, StrongScalingShrinksComputeWithTheBatchAndInputAndCoresCap) {
  // Batch 4 of the calibrated 8: forward, backward and ready times halve.
  const StepPrediction p = step("allreduce", 4, one_node(), 4);
  // Bucket 1 ready 2.5 ms, ends 8.56; bucket 2 ready 10 ms, ends 22.06.
  EXPECT_NEAR(p.step_s, 5e-3 + 22.06e-3 + 2e-3, 1e-12);
  // A 100 samples/s input pipeline: 8 samples take 80 ms.
  const StrategySpec s = parse_strategy("allreduce");
  const Workload w = two_tensors();
  PredictOptions o;
  o.input_samples_per_s = 100;
  const auto buckets = plan_workload_buckets(w, false, 1, 25);
  const StepPrediction in = predict_step(w, one_node(), s, buckets, 1, 8, o);
  EXPECT_NEAR(in.step_s, 80e-3, 1e-12);
  EXPECT_EQ(in.bottleneck, "input pipeline");
  // Four 1-thread workers sharing 2 cores compute at half speed.
  o = {};
  o.shared_cores = 2;
  o.threads_per_worker = 1;
  EXPECT_NEAR(predict_step(w, one_node(), s, buckets, 4, 8, o).compute_s, 2 * 32e-3, 1e-12);
}

TEST(PredictStep, OnSharedCoresMovingAndCastingBytesTakesCpuFromBackward) {
  const Workload w = two_tensors();
  const auto buckets = plan_workload_buckets(w, false, 1, 25);
  Network n = one_node();
  n.cast_bytes_per_s = 4e9;
  PredictOptions o;
  o.shared_cores = 2;
  o.threads_per_worker = 1;
  o.copy_bytes_per_s = 1e9;
  // 2 workers, fp16: a rank sends 6 MB (6 ms at 1 GB/s), the casts take
  // 2 x 12 MB / 4 GB/s = 6 ms: backward 20 -> 32 ms, ready times x 1.6
  // (8 and 32 ms). The buckets' rings, casts gone: 2.02 ms ending 10.02,
  // 4.02 ms ending 36.02.
  const StrategySpec fp16 = parse_strategy("allreduce+fp16");
  StepPrediction p = predict_step(w, n, fp16, buckets, 2, 8, o);
  EXPECT_NEAR(p.step_s, 10e-3 + 36.02e-3 + 2e-3, 1e-12);
  EXPECT_NEAR(p.compute_s, 10e-3 + 32e-3 + 2e-3, 1e-12);
  // Cores of their own: the casts ride the stream, backward keeps 20 ms:
  // 4.02 ms from 5 (9.02), 8.02 ms from 20 (28.02).
  o.shared_cores = 0;
  EXPECT_NEAR(predict_step(w, n, fp16, buckets, 2, 8, o).step_s, 10e-3 + 28.02e-3 + 2e-3, 1e-12);
  // 4 workers on 2 cores, fp32: compute x 2; the 18 MB a rank sends cost
  // 18 ms x 2; backward 40 -> 76 ms, ready times 19 and 76 ms; rings of
  // 6.06 and 12.06 ms end at 25.06 and 88.06.
  o.shared_cores = 2;
  p = predict_step(w, n, parse_strategy("allreduce"), buckets, 4, 8, o);
  EXPECT_NEAR(p.step_s, 20e-3 + 88.06e-3 + 4e-3, 1e-12);
  // The shared cores move every rank's bytes: the tree's 3 messages up and
  // 3 down, and ps:1's 3 pushes and 3 pulls, are 2 x 3/4 x 12 MB a rank on
  // average, as the ring's, though rank 0 sends 24 MB (tree) or 36 MB (PS).
  for (const char* other : {"tree", "ps:1", "hierarchical"}) {
    const StepPrediction q = predict_step(w, one_node(2), parse_strategy(other), buckets, 4, 8, o);
    EXPECT_NEAR(q.compute_s, 20e-3 + 76e-3 + 4e-3, 1e-12) << other;
  }
  EXPECT_NEAR(predict_step(w, n, parse_strategy("tree"), buckets, 4, 8, o).bytes_per_rank, 24e6,
              1e-6);
  EXPECT_NEAR(predict_step(w, n, parse_strategy("ps:1"), buckets, 4, 8, o).bytes_per_rank, 36e6,
              1e-6);
}

/// 4 nodes of one worker, 0.1 GB/s links; with a fabric, groups of
/// `per_group` nodes with uplinks of `uplink` B/s.
Network racks(long long per_group, double uplink) {
  Network n = one_node(1);
  n.fabric = {per_group, uplink};
  return n;
}

TEST(PredictFabric, AnUplinkAsFastAsTheLinksSlowsAParameterServerButNotARing) {
  // Flat ring of 12 MB over 4 workers: 6 alpha + 1.5 x 12 MB / 1e8 = 180.6 ms.
  const double ring = 10e-3 + 20e-3 + 0.6e-3 + 180e-3 + 2e-3;
  EXPECT_NEAR(step("allreduce+flat", 4, one_node(1)).step_s, ring, kTol);
  // Two racks of 2 whose uplinks match the links: the ring's one edge out
  // of each rack carries what a node's link does, so nothing changes.
  EXPECT_NEAR(step("allreduce+flat", 4, racks(2, 1e8)).step_s, ring, kTol);
  // Half as fast: 1.5 x 12 MB / 5e7 = 360 ms, and the uplink is named.
  const StepPrediction slow = step("allreduce+flat", 4, racks(2, 5e7));
  EXPECT_NEAR(slow.step_s, 10e-3 + 20e-3 + 0.6e-3 + 360e-3 + 2e-3, kTol);
  EXPECT_EQ(slow.bottleneck, "fabric uplink");
  // One group holds every node: no uplink is crossed.
  EXPECT_NEAR(step("allreduce+flat", 4, racks(4, 1e6)).step_s, ring, kTol);
  // ps:4 colocated: a push loads each link with 3/4 S = 9 MB (90 ms), but
  // each rack's 2 workers send half of S to the 2 shards outside it:
  // 2 x 2 x S/4 = 12 MB on the uplink, 120 ms, each push and each pull.
  // Between them the shard applies its quarter: 2 ms / 4.
  EXPECT_NEAR(step("ps:4+flat", 4, one_node(1)).step_s, 10e-3 + 20e-3 + 2 * 90.1e-3 + 0.5e-3, kTol);
  const StepPrediction ps = step("ps:4+flat", 4, racks(2, 1e8));
  EXPECT_NEAR(ps.step_s, 10e-3 + 20e-3 + 2 * 120.1e-3 + 0.5e-3, kTol);
  EXPECT_EQ(ps.bottleneck, "fabric uplink");
  // Hierarchical's ring runs over the nodes' leaders: 2 nodes of 2 workers
  // in groups of 1, uplink 5e7: 2 alpha + 12 MB / 5e7 = 240.2 ms between
  // the two trees inside the nodes (1 message each, 12 ms + 10 us).
  Network two = racks(1, 5e7);
  two.workers_per_node = 2;
  EXPECT_NEAR(step("hierarchical+flat", 4, two).step_s,
              10e-3 + 20e-3 + 2 * 12.01e-3 + 240.2e-3 + 2e-3, kTol);
}

TEST(PredictFabric, TheBusiestUplinkOfAnAllToAllCountsWhereEachSideLives) {
  const Fabric pairs{2, 1};
  // 4 workers and 4 shards, one a node: each rack sends 2 x 2 x S/4.
  EXPECT_DOUBLE_EQ(all_to_all_uplink_bytes({0, 1, 4}, {0, 1, 4}, 1e6, pairs), 1e6);
  // 5 workers, 2 a node (nodes 0-2), ps:2 on ranks 0 and 1 (node 0): the
  // worker on node 2 sends all of S out of its rack; rack 0 takes it in.
  EXPECT_DOUBLE_EQ(all_to_all_uplink_bytes({0, 2, 5}, {0, 2, 2}, 1e6, pairs), 1e6);
  // Dedicated: 2 shards on nodes 0-1, 4 workers on nodes 2-5: rack 0 takes
  // in 4 x S from the 4 workers outside it.
  EXPECT_DOUBLE_EQ(all_to_all_uplink_bytes({2, 1, 4}, {0, 1, 2}, 1e6, pairs), 4e6);
  // Inside one group, or without a fabric: nothing crosses an uplink.
  EXPECT_DOUBLE_EQ(all_to_all_uplink_bytes({0, 1, 4}, {0, 1, 4}, 1e6, {4, 1}), 0);
  EXPECT_DOUBLE_EQ(all_to_all_uplink_bytes({0, 1, 4}, {0, 1, 4}, 1e6, {}), 0);
  // 100,000,000 workers in racks of 1,000 (no loop over them): every rack
  // sends its 1,000 workers' bytes to the 2 shards in rack 0, which takes
  // in all the others': (1e8 - 1000) x S.
  EXPECT_DOUBLE_EQ(all_to_all_uplink_bytes({0, 1, 100'000'000}, {0, 1, 2}, 1, {1000, 1}),
                   1e8 - 1000);
  Placement p{3, 4, 10};  // nodes 3, 4 (4 each) and 5 (2)
  EXPECT_EQ(p.last_node(), 5);
  EXPECT_EQ(p.on_nodes(0, 4), 4);
  EXPECT_EQ(p.on_nodes(4, 100), 6);
  EXPECT_EQ(p.on_nodes(6, 8), 0);
}

TEST(PredictFabric, WhatTheFabricTermDoesNotModelIsRefusedWhenItIsCrossed) {
  PredictOptions o;
  o.workers = {4};
  for (const std::string strategy : {"tree", "allreduce-hd", "ps:2+async"}) {
    expect_refused([&] { predict(two_tensors(), racks(2, 1e8), {parse_strategy(strategy)}, o); },
                   strategy,
                   "with a shared fabric only rings (allreduce, hierarchical, zero) and a "
                   "synchronous ps are modelled");
    // Inside one group the fabric is never crossed: predicted as without it.
    EXPECT_NO_THROW(predict(two_tensors(), racks(4, 1e8), {parse_strategy(strategy)}, o))
        << strategy;
  }
}

TEST(Predict, EfficiencyIsAgainstOneWorkerWithoutExchange) {
  PredictOptions o;
  o.workers = {1, 4};
  const Prediction weak = predict(two_tensors(), one_node(), {parse_strategy("allreduce")}, o);
  EXPECT_NEAR(weak.t1_s, 32e-3, 1e-12);
  const StepPrediction& p4 = weak.strategies[0].points[1];
  EXPECT_NEAR(p4.efficiency_pct, 100 * 32e-3 / p4.step_s, 1e-9);
  EXPECT_NEAR(p4.speedup, p4.throughput / (8 / 32e-3), 1e-9);
  o.scaling = "strong";
  o.batch = 8;
  const Prediction strong = predict(two_tensors(), one_node(), {parse_strategy("allreduce")}, o);
  const StepPrediction& s4 = strong.strategies[0].points[1];
  EXPECT_DOUBLE_EQ(s4.batch_per_worker, 2);
  EXPECT_NEAR(s4.efficiency_pct, 100 * 32e-3 / (4 * s4.step_s), 1e-9);
  EXPECT_LT(s4.efficiency_pct, p4.efficiency_pct);  // weak scaling beats strong
}

void expect_compute(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << "point " << i;
}

// PredictOptions::busy: the points where at least its side_by_side (and 2)
// workers share cores compute at its times; t1 stays one worker alone.
TEST(Predict, ABusyWorkloadComputesWhereEnoughWorkersShareCores) {
  auto busy = std::make_shared<Workload>(two_tensors());
  busy->forward_s = 15e-3;
  busy->backward_s = 30e-3;
  busy->grads = {{4'000'000, 7.5e-3}, {8'000'000, 30e-3}};
  busy->side_by_side = 2;
  PredictOptions o;
  o.workers = {1, 2, 4};
  o.busy = busy;
  const auto compute = [&](const Network& n) {
    const Prediction p = predict(two_tensors(), n, {parse_strategy("allreduce")}, o);
    EXPECT_NEAR(p.t1_s, 32e-3, 1e-12);
    std::vector<double> s;
    for (const StepPrediction& point : p.strategies[0].points) s.push_back(point.compute_s);
    return s;
  };
  expect_compute(compute(one_node(8)), {32e-3, 47e-3, 47e-3});
  // One worker a node computes alone, unless every worker shares the cores.
  expect_compute(compute(one_node(1)), {32e-3, 32e-3, 32e-3});
  o.shared_cores = 4;
  expect_compute(compute(one_node(1)), {32e-3, 47e-3, 47e-3});
  // Measured with 4 side by side: 2 workers are nearer alone.
  o.shared_cores = 0;
  busy->side_by_side = 4;
  expect_compute(compute(one_node(8)), {32e-3, 32e-3, 47e-3});
  // The busy step at 2 workers of one node: its later bucket is ready at
  // 30 ms of the busy backward and its ring of 2 takes 2 alpha + 8 MB / (1 GB/s).
  busy->side_by_side = 2;
  o.workers = {2};
  const Prediction two = predict(two_tensors(), one_node(8), {parse_strategy("allreduce")}, o);
  EXPECT_NEAR(two.strategies[0].points[0].step_s, 15e-3 + 30e-3 + 2e-5 + 8e-3 + 2e-3, 1e-12);
  busy->grads.pop_back();
  expect_refused([&] { predict(two_tensors(), one_node(8), {parse_strategy("allreduce")}, o); },
                 "the busy calibration measured toy (4000000 gradient bytes in 1 tensors)",
                 "give records of the same model and shape");
}

TEST(Predict, BadInputIsRefusedNamingIt) {
  PredictOptions o;
  o.workers = {1, 2};
  auto refused = [&](const std::string& strategy, const Network& n, const std::string& needle) {
    expect_refused([&] { predict(two_tensors(), n, {parse_strategy(strategy)}, o); }, strategy,
                   needle);
  };
  refused("ps:4", one_node(), "4 colocated shards need at least 4 workers");
  refused("hierarchical", one_node(1), "hierarchical needs 2 or more workers per node");
  o.workers = {0};
  refused("allreduce", one_node(), "must be >= 1");
  o.workers = {16};
  o.scaling = "strong";
  o.batch = 8;
  refused("allreduce", one_node(), "N = 16 workers exceed the global batch of 8");
  o.scaling = "sideways";
  refused("allreduce", one_node(), "scaling must be weak or strong");
}

TEST(PredictStep, AParameterServerShardHoldsWholeTensorsRoundRobinOrBySize) {
  Workload w;
  w.batch = 1;
  // Registration order 0..3: 8, 1, 4, 1 MB (ready order does not matter).
  w.grads = {{1'000'000, 0, 3}, {4'000'000, 0, 2}, {1'000'000, 0, 1}, {8'000'000, 0, 0}};
  // Round-robin over 2: shard 0 takes 8 + 4, shard 1 takes 1 + 1.
  EXPECT_DOUBLE_EQ(largest_shard_share(w, 2, false), 12.0 / 14);
  // Greedy: 8 -> 0, 4 -> 1, 1 -> 1, 1 -> 1.
  EXPECT_DOUBLE_EQ(largest_shard_share(w, 2, true), 8.0 / 14);
  // More shards than tensors: the largest tensor alone.
  EXPECT_DOUBLE_EQ(largest_shard_share(w, 8, false), 8.0 / 14);
  EXPECT_DOUBLE_EQ(largest_shard_share(w, 1, false), 1.0);
  // Unknown order: balanced.
  EXPECT_DOUBLE_EQ(largest_shard_share(two_tensors(), 4, false), 0.25);
  // Partitioned at 2 MiB (524,288 floats): the 8 MB tensor splits in 4
  // pieces of 2 MB, the 4 MB one in 2, the 1 MB ones stay whole: units of
  // 2,2,2,2 | 1 | 2,2 | 1 MB. Round-robin over 3 shards: 2+2+2 = 6, 2+1+1,
  // 2+2. Greedy: the six 2 MB pieces two to a shard, then 1 + 1: 5, 5, 4.
  EXPECT_DOUBLE_EQ(largest_shard_share(w, 3, false, 2), 6.0 / 14);
  EXPECT_DOUBLE_EQ(largest_shard_share(w, 3, true, 2), 5.0 / 14);
}

TEST(PredictParse, StrategiesAndTheirModifiers) {
  StrategySpec s = parse_strategy("ps:4+dedicated+async+bf16");
  EXPECT_EQ(s.algorithm, Algorithm::kPs);
  EXPECT_EQ(s.ps_shards, 4);
  EXPECT_TRUE(s.ps_dedicated && s.ps_async);
  EXPECT_EQ(s.compress, "bf16");
  EXPECT_EQ(parse_strategy("ps:node").shards(6), 6);
  EXPECT_EQ(parse_strategy("zero:3").zero_stage, 3);
  EXPECT_TRUE(parse_strategy("tree+flat").flat);
  EXPECT_DOUBLE_EQ(parse_strategy("ps:2+greedy+partition:0.5").ps_partition_mb, 0.5);
  EXPECT_TRUE(parse_strategy("ps:2+greedy+partition:0.5").ps_greedy);
  for (const std::string bad :
       {"ring", "ps:0", "zero:4", "allreduce+dedicated", "allreduce:2",
        "ps:2+dedicated+node-aggregate", "zero+fp16", "allreduce+", "ps:x", "ps+partition:0",
        "ps+partition:x", "allreduce+partition:4", "allreduce+fp16+bf16", "allreduce+fp16+fp16",
        "ps+node-aggregate+node-aggregate", "tree+flat+flat", "ps+partition:1+partition:2",
        "allreduce+update-then-pull", "ps:2+async+update-then-pull"}) {
    EXPECT_THROW(parse_strategy(bad), Error) << bad;
  }
  try {
    parse_strategy("allreduce+bf16+fp16");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "strategy 'allreduce+bf16+fp16': one compression at most (+fp16 or +bf16)");
  }
  // The default list leaves out hierarchical where a node holds one worker.
  const std::vector<std::string> one = default_strategies(1), eight = default_strategies(8);
  EXPECT_EQ(std::count(one.begin(), one.end(), "hierarchical"), 0);
  EXPECT_EQ(std::count(eight.begin(), eight.end(), "hierarchical"), 1);
}

TEST(PredictParse, WorkerLists) {
  EXPECT_EQ(parse_workers("1-64"), (std::vector<long long>{1, 2, 4, 8, 16, 32, 64}));
  EXPECT_EQ(parse_workers("1-10:3"), (std::vector<long long>{1, 4, 7, 10}));
  EXPECT_EQ(parse_workers("8-512:x4,3,8"), (std::vector<long long>{3, 8, 32, 128, 512}));
  EXPECT_EQ(parse_workers("1-100000:1").size(), 100000u);
  for (const std::string bad : {"0", "-3", "4-2", "a", "1,,2", "1-8:x1", "1-8:0", "99999999999"}) {
    EXPECT_THROW(parse_workers(bad), Error) << bad;
  }
}

TEST(PredictSystemFile, ShippedSystemsParseAndBadFilesAreRefusedNamingTheKey) {
  for (const std::string name : {"dgx1-p100", "dgx1-v100", "ec2-p2-8xlarge", "horovod-roce", "goyal-bigbasin",
                                 "local-cluster"}) {
    const SystemSpec s = load_system(name, DLSCALE_SOURCE_DIR "/examples/systems");
    EXPECT_EQ(s.name, name);
    EXPECT_GT(s.network.inter.bytes_per_s, 0);
  }
  const SystemSpec s = parse_system("name: x\nworkers_per_node: 4\ninter: {gbit_s: 8, latency_us: 5}\n"
                                    "intra: {gbyte_s: 2}\nbatch: 32\nrates: {resnet50: 100}\n", "t.yaml");
  EXPECT_DOUBLE_EQ(s.network.inter.bytes_per_s, 1e9);
  EXPECT_DOUBLE_EQ(s.network.inter.alpha_s, 5e-6);
  EXPECT_DOUBLE_EQ(s.network.intra.bytes_per_s, 2e9);
  EXPECT_DOUBLE_EQ(s.rate("resnet50"), 100);
  auto refused = [](const std::string& yaml, const std::string& needle) {
    expect_refused([&] { parse_system(yaml, "t.yaml"); }, yaml, needle);
  };
  refused("name: x\ninter: {gbit_s: 1}\nlink: 3\n", "unknown key 'link'");
  refused("name: x\n", "needs 'name' and 'inter'");
  refused("name: x\ninter: {gbit_s: 1, gbyte_s: 1}\n", "one bandwidth");
  refused("name: x\ninter: {gbit_s: -1}\n", "t.yaml line 2: 'inter.gbit_s' must be in [1e-06, 1e+06] (got -1)");
  // Upper bounds: nothing a machine could have beyond them, and no value
  // that overflows an integer or swamps the model (issue 42).
  refused("name: x\ninter: {gbit_s: 1, latency_us: 1e308}\n",
          "t.yaml line 2: 'inter.latency_us' must be in [0, 1e+06] (got 1e308)");
  refused("name: x\ninter: {gbit_s: 1e308}\n", "'inter.gbit_s' must be in [1e-06, 1e+06] (got 1e308)");
  refused("name: x\ninter: {gbit_s: 1}\nworkers_per_node: 99999999999999999999\n",
          "t.yaml line 3: 'workers_per_node' must be in [1, 1024] (got 99999999999999999999)");
  refused("name: x\ninter: {gbit_s: 1}\nbatch: 1e308\n", "'batch' must be in [1, 1.04858e+06] (got 1e308)");
  refused("name: x\ninter: {gbit_s: 1}\nbatch: 32\nrates: {m: 1e308}\n", "'rates.m' must be in");
  refused("name: x\ninter: {gbit_s: 1}\nbucket_mb: .nan\n", "'bucket_mb' must be in");
  refused("name: x\ninter: {gbit_s: 1}\npublished: [{model: m, workers: [1, 1e300], samples_per_s: [1, 2]}]\n",
          "'workers' must be in [1, 1e+08]");
  refused("name: x\ninter: {gbit_s: 1}\npublished: [{model: m, workers: [1, 2], samples_per_s: [1]}]\n",
          "2 workers but 1 values");
  refused("name: x\ninter: {gbit_s: 1}\nrates: {m: 3}\n", "need the 'batch'");
  refused("{{{", "not YAML");
  EXPECT_THROW(load_system("no-such-system", DLSCALE_SOURCE_DIR "/examples/systems"), Error);
}

TEST(PredictSystemFile, AFabricIsGivenByItsUplinkOrItsOversubscription) {
  const std::string base = "name: x\ninter: {gbit_s: 10}\n";
  NetworkFlags none;
  // Groups of 4 nodes at 4:1: the uplink carries 4 x 10 / 4 = 10 Gbit/s.
  SystemSpec s =
      parse_system(base + "fabric: {nodes_per_group: 4, oversubscription: 4}\n", "t.yaml");
  Network n = resolve_network(none, &s);
  EXPECT_EQ(n.fabric.nodes_per_group, 4);
  EXPECT_DOUBLE_EQ(n.fabric.bytes_per_s, 1.25e9);
  // ... from the inter link the flags give.
  NetworkFlags faster;
  faster.link_gbps = 40;
  EXPECT_DOUBLE_EQ(resolve_network(faster, &s).fabric.bytes_per_s, 5e9);
  s = parse_system(base + "fabric: {nodes_per_group: 16, uplink_gbit_s: 100}\n", "t.yaml");
  EXPECT_DOUBLE_EQ(resolve_network(none, &s).fabric.bytes_per_s, 12.5e9);
  // The flags: a fabric of their own, or none over the system's.
  NetworkFlags flags;
  flags.link_gbps = 1;
  flags.fabric_nodes = 2;
  flags.fabric_gbps = 0.5;
  n = resolve_network(flags, nullptr);
  EXPECT_EQ(n.fabric.nodes_per_group, 2);
  EXPECT_DOUBLE_EQ(n.fabric.bytes_per_s, 0.5e9 / 8);
  flags.fabric_nodes = 0;
  EXPECT_EQ(resolve_network(flags, &s).fabric.nodes_per_group, 0);
  flags.fabric_nodes = 2;
  flags.fabric_gbps = 0;
  expect_refused([&] { resolve_network(flags, nullptr); }, "--fabric-nodes 2",
                 "needs its uplink: --fabric-gbps");
  flags.fabric_gbps = -3;
  expect_refused([&] { resolve_network(flags, nullptr); }, "--fabric-gbps -3",
                 "--fabric-gbps must be in");
  flags.fabric_gbps = 1;
  flags.fabric_nodes = -5;
  expect_refused([&] { resolve_network(flags, nullptr); }, "--fabric-nodes -5",
                 "--fabric-nodes must be in [0, 1e+08]");
  flags.fabric_nodes = 2;
  flags.fabric_gbps = 1e9;
  expect_refused([&] { resolve_network(flags, nullptr); }, "--fabric-gbps 1e9",
                 "--fabric-gbps must be in");
  for (const auto& [fabric, needle] : std::vector<std::pair<std::string, std::string>>{
           {"{uplink_gbit_s: 1}", "needs nodes_per_group and one of"},
           {"{nodes_per_group: 2}", "needs nodes_per_group and one of"},
           {"{nodes_per_group: 2, uplink_gbit_s: 1, oversubscription: 2}",
            "needs nodes_per_group and one of"},
           {"{nodes_per_group: 0, uplink_gbit_s: 1}",
            "'fabric.nodes_per_group' must be in [1, 1e+08]"},
           {"{nodes_per_group: 2, oversubscription: 0}", "'fabric.oversubscription' must be in"},
           {"{nodes_per_group: 2, uplink_gbit_s: 1, bisection: 3}",
            "unknown key 'bisection' in fabric"},
           {"3", "fabric must be a mapping"}}) {
    expect_refused([&] { parse_system(base + "fabric: " + fabric + "\n", "t.yaml"); }, fabric,
                   needle);
  }
}

TEST(PredictSystemFile, ACommbenchRecordGivesOneRingLinkAndBadOnesAreRefused) {
  nlohmann::json r = nlohmann::json::parse(R"({
    "kind": "commbench",
    "inputs": {"world_size": 4, "dtype": "float32", "cluster": {"hosts": 4}},
    "results": {"fits": {"allreduce": {"alpha_us": 600.0, "bandwidth_gbps": 1.5}}}})");
  bool inter = false;
  std::string wire;
  const Link l = link_from_commbench(r, "cb.json", inter, wire);
  EXPECT_TRUE(inter);
  EXPECT_EQ(wire, "none");
  EXPECT_DOUBLE_EQ(l.bytes_per_s, 1.5e9 * 2 * 3 / 4);  // B x 2(p-1)/p
  EXPECT_DOUBLE_EQ(l.alpha_s, 600e-6 / 6);             // alpha / 2(p-1)
  // A ping-pong's fit (--op sendrecv) is the one-way rate; none, none.
  EXPECT_DOUBLE_EQ(l.one_way_bytes_per_s, 0);
  nlohmann::json pingpong = r;
  pingpong["results"]["fits"]["sendrecv"] = {{"alpha_us", 300.0}, {"bandwidth_gbps", 2.5}};
  EXPECT_DOUBLE_EQ(link_from_commbench(pingpong, "cb.json", inter, wire).one_way_bytes_per_s,
                   2.5e9);
  nlohmann::json local = r;
  local["inputs"].erase("cluster");
  local["inputs"].erase("dtype");  // records before the key: float32
  link_from_commbench(local, "cb.json", inter, wire);
  EXPECT_FALSE(inter);
  auto refused = [](const nlohmann::json& bad, const std::string& needle) {
    bool ignored = false;
    std::string unused;
    expect_refused([&] { link_from_commbench(bad, "cb.json", ignored, unused); }, bad.dump(),
                   needle);
  };
  nlohmann::json train = r;
  train["kind"] = "train";
  refused(train, "cb.json: not a 'dlscale commbench --json' record");
  nlohmann::json tree_only = r;
  tree_only["results"]["fits"] = {{"tree", r["results"]["fits"]["allreduce"]}};
  refused(tree_only, "cb.json: no allreduce fit");
  nlohmann::json one_rank = r;
  one_rank["inputs"]["world_size"] = 1;
  refused(one_rank, "timed on 1 rank(s)");
  nlohmann::json flat = r;
  flat["results"]["fits"]["allreduce"]["bandwidth_gbps"] = 0.0;
  refused(flat, "the allreduce fit has no bandwidth");
  nlohmann::json numeric_dtype = r;
  numeric_dtype["inputs"]["dtype"] = 5;
  refused(numeric_dtype, "cb.json: a malformed commbench record: ");
  nlohmann::json text_ranks = r;
  text_ranks["inputs"]["world_size"] = "four";
  refused(text_ranks, "cb.json: a malformed commbench record: ");
  nlohmann::json text_rate = pingpong;
  text_rate["results"]["fits"]["sendrecv"]["bandwidth_gbps"] = "fast";
  refused(text_rate, "cb.json: a malformed commbench record: ");
  nlohmann::json int8 = r;
  int8["inputs"]["dtype"] = "int8";
  refused(int8,
          "cb.json: the allreduce was timed in int8; a link's rate comes from a float32, float16 "
          "or bfloat16");
  // A 16-bit record names its wire type: its rate is that wire's, not a link's.
  for (const auto& [dtype, name] : std::vector<std::pair<std::string, std::string>>{
           {"float16", "fp16"}, {"bfloat16", "bf16"}}) {
    nlohmann::json half = r;
    half["inputs"]["dtype"] = dtype;
    EXPECT_DOUBLE_EQ(link_from_commbench(half, "cb.json", inter, wire).bytes_per_s,
                     1.5e9 * 2 * 3 / 4);
    EXPECT_EQ(wire, name);
  }
}

TEST(PredictSystemFile, ACommbenchAcrossAShapedHopGivesWhatAHopOfThatRateDelivers) {
  const auto record = [](const std::string& cluster, const std::string& dtype = "float32") {
    return nlohmann::json::parse(
        R"({"kind": "commbench", "inputs": {"world_size": 2, "dtype": ")" + dtype +
        R"(", "cluster": )" + cluster +
        R"(}, "results": {"fits": {"allreduce": {"alpha_us": 1000.0, "bandwidth_gbps": 0.011}}}})");
  };
  EXPECT_EQ(shaped_hop_mbit(record(R"({"hosts": 2, "link_mbit": 100})")), 100);
  // The racks' uplink when it is the narrower hop (or the links are unshaped).
  EXPECT_EQ(shaped_hop_mbit(
                record(R"({"hosts": 2, "link_mbit": 100, "rack_hosts": 1, "uplink_mbit": 50})")),
            50);
  EXPECT_EQ(shaped_hop_mbit(
                record(R"({"hosts": 2, "link_mbit": 0, "rack_hosts": 1, "uplink_mbit": 30})")),
            30);
  EXPECT_EQ(shaped_hop_mbit(
                record(R"({"hosts": 2, "link_mbit": 100, "rack_hosts": 1, "uplink_mbit": 200})")),
            100);
  // Nothing shaped crossed: one host, unshaped links, no cluster.
  EXPECT_EQ(shaped_hop_mbit(record(R"({"hosts": 1, "link_mbit": 100})")), 0);
  EXPECT_EQ(shaped_hop_mbit(record(R"({"hosts": 2, "link_mbit": 0})")), 0);
  EXPECT_EQ(shaped_hop_mbit(record("null")), 0);
  EXPECT_EQ(shaped_hop_mbit(nlohmann::json::array()), 0);
  // report --type predict takes the shaped ones apart: 11 MB/s for a hop of
  // 100 Mbit/s (B x 2(p-1)/p at p = 2), the unshaped one left for the base.
  const std::string shaped = testing::temp_path("shaped.json"),
                    unshaped = testing::temp_path("unshaped.json"),
                    half = testing::temp_path("half.json");
  write_file_atomic(shaped, record(R"({"hosts": 2, "link_mbit": 100})").dump());
  write_file_atomic(unshaped, record(R"({"hosts": 2, "link_mbit": 0})").dump());
  write_file_atomic(half, record(R"({"hosts": 2, "link_mbit": 100})", "float16").dump());
  SweepCheckInputs in;
  std::vector<std::string> paths = {shaped, unshaped};
  take_shaped_commbench(paths, in);
  EXPECT_EQ(paths, std::vector<std::string>{unshaped});
  ASSERT_EQ(in.shaped_bytes_per_s.size(), 1u);
  EXPECT_DOUBLE_EQ(in.shaped_bytes_per_s.at(100), 11e6);
  paths = {half};
  expect_refused([&] { take_shaped_commbench(paths, in); }, half,
                 "gives its rate in float32 (this one ran in fp16)");
  for (const std::string& path : {shaped, unshaped, half}) std::remove(path.c_str());
}

TEST(PredictWire, A16BitWireGoesAtItsOwnMeasuredRateOnTheLinksAndTheSharedCores) {
  // Flat fp16 allreduce of 12 MB over 4 workers on one node: 6 MB on the
  // wire, 6 alpha + 1.5 x 6 MB / 1e9 = 9.06 ms at the fp32 rate.
  Network n = one_node(8);
  EXPECT_NEAR(step("allreduce+flat+fp16", 4, n).step_s, 10e-3 + 20e-3 + 9.06e-3 + 2e-3, kTol);
  // fp16 measured at 0.25 GB/s on this level: 1.5 x 6 MB / 2.5e8 = 36 ms.
  n.wire16[0].intra_bytes_per_s = 2.5e8;
  EXPECT_NEAR(step("allreduce+flat+fp16", 4, n).step_s, 10e-3 + 20e-3 + 36.06e-3 + 2e-3, kTol);
  // bf16 and float32 keep their rates; a 16-bit rate faster than the link
  // does not speed it up.
  EXPECT_NEAR(step("allreduce+flat+bf16", 4, n).step_s, 10e-3 + 20e-3 + 9.06e-3 + 2e-3, kTol);
  EXPECT_NEAR(step("allreduce+flat", 4, n).step_s, 10e-3 + 20e-3 + 18.06e-3 + 2e-3, kTol);
  n.wire16[1].intra_bytes_per_s = 4e9;
  EXPECT_NEAR(step("allreduce+flat+bf16", 4, n).step_s, 10e-3 + 20e-3 + 9.06e-3 + 2e-3, kTol);
  // The PS's pull after the update (the shard's half: 1 ms) takes the
  // wire's rate too.
  const StepPrediction ps = step("ps:2+flat+fp16", 4, n);
  const double push = 1e-5 + 1.5 * 6e6 / 2.5e8;  // the busiest shard: (N-1) S/K, S = 6 MB
  EXPECT_NEAR(ps.step_s, 10e-3 + 20e-3 + push + 1e-3 + push, kTol);
  // On shared cores the bytes a rank sends cost CPU at that wire's copy
  // rate: 1.5 x 6 MB at 0.5 GB/s = 18 ms of backward (the fp32 rate of
  // 1 GB/s would give 9 ms).
  PredictOptions o;
  o.shared_cores = 8;
  o.copy_bytes_per_s = 1e9;
  o.wire16_copy_bytes_per_s = {5e8, 0};
  const StrategySpec fp16 = parse_strategy("allreduce+flat+fp16");
  const Workload w = two_tensors();
  const auto buckets = plan_workload_buckets(w, true, o.first_bucket_mb, o.bucket_mb);
  const double backward = predict_step(w, n, fp16, buckets, 4, 8, o).compute_s - 12e-3;
  EXPECT_NEAR(backward, 20e-3 + 18e-3, kTol);
  o.wire16_copy_bytes_per_s = {0, 0};
  EXPECT_NEAR(predict_step(w, n, fp16, buckets, 4, 8, o).compute_s - 12e-3, 20e-3 + 9e-3, kTol);
}

TEST(PredictWire, EachSixteenBitTypeCastsAtItsOwnRate) {
  // Flat allreduce of 12 MB fp32 over 4 workers on one node; the casts
  // read the 12 MB down and up: 2 x 12 MB / rate.
  Network n = one_node(8);
  const double free_fp16 = step("allreduce+flat+fp16", 4, n).step_s;
  const double free_bf16 = step("allreduce+flat+bf16", 4, n).step_s;
  n.cast_bytes_per_s = 2e9;  // every type: 12 ms
  EXPECT_NEAR(step("allreduce+flat+fp16", 4, n).step_s, free_fp16 + 12e-3, kTol);
  EXPECT_NEAR(step("allreduce+flat+bf16", 4, n).step_s, free_bf16 + 12e-3, kTol);
  n.wire16[0].cast_bytes_per_s = 1e9;  // fp16's own: 24 ms; bf16 keeps the 12
  EXPECT_NEAR(step("allreduce+flat+fp16", 4, n).step_s, free_fp16 + 24e-3, kTol);
  EXPECT_NEAR(step("allreduce+flat+bf16", 4, n).step_s, free_bf16 + 12e-3, kTol);
  EXPECT_DOUBLE_EQ(n.cast_rate("none"), 0);  // float32 is not cast
  // A 16-bit wire's own rate is an allreduce's: float32's one-way rate is
  // not that wire's, so its links lose it.
  Network loop = one_node(8);
  loop.inter.one_way_bytes_per_s = 5e8;
  loop.wire16[0].inter_bytes_per_s = 5e7;
  EXPECT_EQ(loop.for_wire("fp16").inter.one_way_bytes_per_s, 0);
  EXPECT_EQ(loop.for_wire("fp16").inter.bytes_per_s, 5e7);
  EXPECT_EQ(loop.for_wire("none").inter.one_way_bytes_per_s, 5e8);
  // On shared cores the casts are CPU time in backward, at the type's own
  // rate: 24 ms beside the 9 ms of copying 1.5 x 6 MB at 1 GB/s.
  PredictOptions o;
  o.shared_cores = 8;
  o.copy_bytes_per_s = 1e9;
  const Workload w = two_tensors();
  const StrategySpec fp16 = parse_strategy("allreduce+flat+fp16");
  const auto buckets = plan_workload_buckets(w, true, o.first_bucket_mb, o.bucket_mb);
  EXPECT_NEAR(predict_step(w, n, fp16, buckets, 4, 8, o).compute_s - 12e-3, 20e-3 + 9e-3 + 24e-3,
              kTol);
  // A system file gives a rate per type; --cast-gbyte-s one for all.
  const std::string base = "name: x\ninter: {gbit_s: 10}\n";
  SystemSpec s = parse_system(base + "cast_gbyte_s: {fp16: 0.92, bf16: 1.33}\n", "t.yaml");
  NetworkFlags none;
  Network sys = resolve_network(none, &s);
  EXPECT_DOUBLE_EQ(sys.cast_rate("fp16"), 0.92e9);
  EXPECT_DOUBLE_EQ(sys.cast_rate("bf16"), 1.33e9);
  NetworkFlags flat;
  flat.cast_gbyte_s = 1.6;
  sys = resolve_network(flat, &s);
  EXPECT_DOUBLE_EQ(sys.cast_rate("fp16"), 1.6e9);
  EXPECT_DOUBLE_EQ(sys.cast_rate("bf16"), 1.6e9);
  expect_refused([&] { parse_system(base + "cast_gbyte_s: {fp32: 1}\n", "t.yaml"); }, "fp32",
                 "fp32");
  expect_refused([&] { parse_system(base + "cast_gbyte_s: {fp16: -1}\n", "t.yaml"); }, "-1",
                 "cast_gbyte_s.fp16");
}

nlohmann::json toy_record() {
  return nlohmann::json::parse(R"({
    "kind": "train", "status": "ok",
    "model": {"name": "toy", "unit": "images"},
    "inputs": {"world_size": 1, "batch": 16},
    "results": {
      "breakdown_ms": {"data": 1.0, "forward": 10.0, "backward": 20.0, "optimizer": 2.0},
      "backward_profile": {"backward_ms": 40.0,
                           "tensors": [{"bytes": 100, "ready_ms": 40.0}, {"bytes": 300, "ready_ms": 10.0}]}}})");
}

TEST(PredictCalibration, ARecordGivesPhaseTimesAndReadyTimesAsShareOfBackward) {
  const Workload w = calibrate_from_record(toy_record(), "r.json");
  EXPECT_EQ(w.batch, 16);
  EXPECT_DOUBLE_EQ(w.data_s, 1e-3);
  EXPECT_DOUBLE_EQ(w.backward_s, 20e-3);
  // Ready order: the 300-byte tensor at 1/4 of backward, then the other at its end.
  ASSERT_EQ(w.grads.size(), 2u);
  EXPECT_EQ(w.grads[0].bytes, 300);
  EXPECT_DOUBLE_EQ(w.grads[0].ready_s, 5e-3);
  EXPECT_DOUBLE_EQ(w.grads[1].ready_s, 20e-3);
  nlohmann::json two = toy_record();
  two["inputs"]["world_size"] = 2;
  EXPECT_THROW(calibrate_from_record(two, "r.json"), Error);
  nlohmann::json bare = toy_record();
  bare["results"].erase("backward_profile");
  try {
    calibrate_from_record(bare, "r.json");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--trace"), std::string::npos) << e.what();
  }
  for (const char* phase : {"data", "forward", "backward", "optimizer"}) {
    nlohmann::json huge = toy_record();
    huge["results"]["breakdown_ms"][phase] = 1e308;
    try {
      calibrate_from_record(huge, "r.json");
      ADD_FAILURE() << phase;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()),
                fmt::format("r.json: 'results.breakdown_ms.{}' must be at most 8.64e+07 (got 1e+308)", phase));
    }
  }
  nlohmann::json huge_batch = toy_record();
  huge_batch["inputs"]["batch"] = 1e300;
  EXPECT_THROW(calibrate_from_record(huge_batch, "r.json"), Error);
  nlohmann::json failed = toy_record();
  failed["status"] = "failed";
  EXPECT_THROW(calibrate_from_record(failed, "r.json"), Error);
  EXPECT_THROW(calibrate_from_record(nlohmann::json::array(), "r.json"), Error);
}

// --calibrate-busy: C independent workers (no exchange) give the times one
// worker computes while the others compute; one worker, or a strategy that
// exchanges, is refused by name.
TEST(PredictCalibration, ABusyRecordIsIndependentWorkersPhaseTimes) {
  nlohmann::json busy = toy_record();
  busy["inputs"]["world_size"] = 2;
  busy["inputs"]["strategy"] = "independent";
  busy["results"]["breakdown_ms"]["backward"] = 30.0;
  const Workload w = calibrate_busy_from_record(busy, "b.json");
  EXPECT_DOUBLE_EQ(w.backward_s, 30e-3);
  EXPECT_DOUBLE_EQ(w.forward_s, 10e-3);
  ASSERT_EQ(w.grads.size(), 2u);
  EXPECT_DOUBLE_EQ(w.grads[0].ready_s, 7.5e-3);  // a quarter of the busy backward
  EXPECT_EQ(w.source, "measured with every core busy: b.json (2 independent workers, batch 16)");
  expect_refused([&] { calibrate_busy_from_record(toy_record(), "b.json"); }, "1 worker(s)",
                 "--strategy independent");
  nlohmann::json exchanging = busy;
  exchanging["inputs"]["strategy"] = "allreduce";
  expect_refused([&] { calibrate_busy_from_record(exchanging, "b.json"); }, "b.json",
                 "strategy 'allreduce'");
  EXPECT_THROW(calibrate_from_record(busy, "b.json"), Error);
  nlohmann::json huge = busy;
  huge["inputs"]["world_size"] = 1e300;
  nlohmann::json half = busy;
  half["inputs"]["world_size"] = 2.5;
  expect_refused([&] { calibrate_busy_from_record(half, "b.json"); }, "b.json",
                 "inputs.world_size must be a whole number (got 2.5)");
  EXPECT_EQ(w.side_by_side, 2);
  expect_refused([&] { calibrate_busy_from_record(huge, "b.json"); }, "1e300 workers",
                 "'inputs.world_size' must be at most");
}

TEST(PredictParse, ARecordsInputsNameTheStrategyPredictRuns) {
  const auto of = [](const char* inputs) { return strategy_of_record(nlohmann::json::parse(inputs)); };
  EXPECT_EQ(of(R"({"strategy": "allreduce", "bucket_mb": 25})"), "allreduce");
  EXPECT_EQ(of(R"({"strategy": "tree", "bucket_mb": 0, "compress": "fp16"})"), "tree+flat+fp16");
  EXPECT_EQ(of(R"({"strategy": "ps", "ps_shards": 2, "ps_placement": "dedicated", "ps_mode": "async",
                   "ps_assign": "greedy", "ps_partition_mb": 0.5})"),
            "ps:2+dedicated+async+greedy+partition:0.5");
  EXPECT_EQ(of(R"({"strategy": "zero", "zero_stage": 3, "bucket_mb": 0})"), "zero:3");
  EXPECT_EQ(of(R"({"strategy": "independent"})"), "");
  // Every name it writes parses.
  EXPECT_NO_THROW(parse_strategy("ps:2+dedicated+async+greedy+partition:0.5"));
}

// The reader and the writer spell the inputs once (core/record_keys.h): the
// inputs `train` records through its option tables name the strategy they
// were given, not the reader's defaults.
TEST(PredictParse, TheInputsTheOptionTablesWriteNameTheStrategy) {
  using dp::Compression, dp::PsAssign, dp::PsMode, dp::PsPlacement, dp::SyncOptions;
  const auto written = [](const SyncOptions& sync) {
    nlohmann::json inputs = nlohmann::json::object();
    record_inputs(sync, inputs);
    record_inputs(sync.ps, inputs);
    return strategy_of_record(inputs);
  };
  SyncOptions ps;
  ps.strategy = "ps";
  ps.bucket_mb = 0;
  ps.ps.shards = 3;
  ps.ps.placement = PsPlacement::kDedicated;
  ps.ps.mode = PsMode::kAsync;
  ps.ps.assign = PsAssign::kGreedy;
  ps.ps.partition_mb = 2;
  EXPECT_EQ(written(ps), "ps:3+dedicated+async+greedy+partition:2+flat");
  SyncOptions zero;
  zero.strategy = "zero";
  zero.zero_stage = 2;
  EXPECT_EQ(written(zero), "zero:2");
  SyncOptions tree;
  tree.strategy = "tree";
  tree.compress = Compression::kBf16;
  EXPECT_EQ(written(tree), "tree+bf16");
}

}  // namespace
}  // namespace dlscale::predict
