#include "predict/collectives.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

namespace dlscale::predict {

const char* link_name(LinkKind kind) {
  switch (kind) {
    case LinkKind::kIntra: return "intra-node link";
    case LinkKind::kInter: return "inter-node link";
    case LinkKind::kShard: return "ps-shard link";
    case LinkKind::kFabric:
      return "fabric uplink";
  }
  return "?";
}

int wire16_index(const std::string& compress) {
  if (compress == "fp16") return 0;
  if (compress == "bf16") return 1;
  return -1;
}

Network Network::for_wire(const std::string& compress) const {
  const int i = wire16_index(compress);
  if (i < 0) return *this;
  Network n = *this;
  const WireRate& w = wire16[static_cast<size_t>(i)];
  // The wire's own rate, timed as an allreduce: its one-way rate is unknown.
  if (w.intra_bytes_per_s > 0) n.intra.set_rate(std::min(n.intra.bytes_per_s, w.intra_bytes_per_s));
  if (w.inter_bytes_per_s > 0) n.inter.set_rate(std::min(n.inter.bytes_per_s, w.inter_bytes_per_s));
  return n;
}

double Network::cast_rate(const std::string& compress) const {
  if (compress == "none") return 0;
  const int i = wire16_index(compress);
  const double own = i >= 0 ? wire16[static_cast<size_t>(i)].cast_bytes_per_s : 0;
  return own > 0 ? own : cast_bytes_per_s;
}

void Network::set_cast_rate(double bytes_per_s) {
  cast_bytes_per_s = bytes_per_s;
  for (WireRate& wire : wire16) wire.cast_bytes_per_s = 0;
}

const Link& Network::flat_link(long long ranks) const { return nodes(ranks) > 1 ? inter : intra; }
LinkKind Network::flat_kind(long long ranks) const { return nodes(ranks) > 1 ? LinkKind::kInter : LinkKind::kIntra; }

long long Network::nodes(long long ranks) const {
  const long long per = std::max(1, workers_per_node);
  return (ranks + per - 1) / per;
}

void Cost::add_transfer(LinkKind kind, double transfer) {
  transfer_s += transfer;
  transfer_by[static_cast<size_t>(kind)] += transfer;
}

LinkKind Cost::busiest() const {
  size_t most = 0;
  // A tie goes to the outer link (shard over inter over intra): the scarcer one.
  for (size_t k = 1; k < transfer_by.size(); ++k) most = transfer_by[k] >= transfer_by[most] ? k : most;
  return static_cast<LinkKind>(most);
}

Cost& Cost::add(const Cost& other) {
  latency_s += other.latency_s;
  transfer_s += other.transfer_s;
  cast_s += other.cast_s;
  for (size_t k = 0; k < transfer_by.size(); ++k) transfer_by[k] += other.transfer_by[k];
  return *this;
}

namespace {

Cost terms(double messages, double bytes, const Link& link, LinkKind kind) {
  Cost c;
  c.latency_s = messages * link.alpha_s;
  c.add_transfer(kind, bytes / link.bytes_per_s);
  return c;
}

}  // namespace

Cost ring_allreduce(double bytes, long long ranks, const Link& link, LinkKind kind) {
  if (ranks <= 1) return {};
  const double p = static_cast<double>(ranks);
  return terms(2 * (p - 1), 2 * (p - 1) / p * bytes, link, kind);
}

Cost halving_doubling_allreduce(double bytes, long long ranks, const Link& link, LinkKind kind) {
  if (ranks <= 1) return {};
  const double p = static_cast<double>(ranks);
  return terms(2 * std::ceil(std::log2(p) - 1e-12), 2 * (p - 1) / p * bytes, link, kind);
}

namespace {

/// The sizes of the two subtrees under the root of a heap-shaped (complete,
/// left-filled) binary tree of n ranks; each is such a tree again.
std::pair<long long, long long> subtree_sizes(long long n) {
  if (n <= 1) return {0, 0};
  long long full = 1;  // 2^h, h the depth of the last level
  while (2 * full <= n) full *= 2;
  const long long last = n - (full - 1);  // ranks on the last level
  const long long left = (full / 2 - 1) + std::min(last, full / 2);
  return {left, n - 1 - left};
}

/// Message slots until the root of a tree of n ranks holds the sum: its
/// link in takes its children's messages one at a time as they come (both
/// receives are posted at once; a shared link ends the last as late).
double tree_up_slots(long long n, std::map<long long, double>& known) {
  if (n <= 1) return 0;
  if (const auto it = known.find(n); it != known.end()) return it->second;
  const auto [left, right] = subtree_sizes(n);
  const double l = tree_up_slots(left, known);
  if (right == 0) return known[n] = l + 1;  // an only child
  const double r = tree_up_slots(right, known);
  // The sooner child's message takes the slot after it is ready, the later
  // one's the slot after both that and its own readiness.
  return known[n] = std::max(std::min(l, r) + 1, std::max(l, r)) + 1;
}

/// Message slots until the last rank of a tree of n ranks holds the root's
/// data: a parent sends to its children at once, so they share its link out
/// and both arrive after as many slots as it has children.
double tree_down_slots(long long n) {
  if (n <= 1) return 0;
  const auto [left, right] = subtree_sizes(n);
  return (right > 0 ? 2.0 : 1.0) + tree_down_slots(left);  // the left subtree is the deeper
}

}  // namespace

Cost tree_reduce(double bytes, long long ranks, const Link& link, LinkKind kind) {
  std::map<long long, double> known;
  const double slots = tree_up_slots(ranks, known);
  return terms(slots, slots * bytes, link.one_way(), kind);
}

Cost tree_broadcast(double bytes, long long ranks, const Link& link, LinkKind kind) {
  const double slots = tree_down_slots(ranks);
  return terms(slots, slots * bytes, link.one_way(), kind);
}

Cost ring_reduce_scatter(double bytes, long long ranks, const Link& link, LinkKind kind) {
  if (ranks <= 1) return {};
  const double p = static_cast<double>(ranks);
  return terms(p - 1, (p - 1) / p * bytes, link, kind);
}

Cost with_uplink(const Cost& c, double uplink_bytes, const Fabric& f) {
  if (uplink_bytes <= 0 || f.bytes_per_s <= 0 || uplink_bytes / f.bytes_per_s <= c.transfer_s)
    return c;
  Cost out;
  out.latency_s = c.latency_s;
  out.cast_s = c.cast_s;
  out.add_transfer(LinkKind::kFabric, uplink_bytes / f.bytes_per_s);
  return out;
}

Cost ring_over_fabric(const Cost& ring, const Link& link, const Fabric& fabric, long long nodes) {
  // The ring's bytes on one link, as many as on each group's uplink.
  return fabric.spans(nodes) ? with_uplink(ring, ring.transfer_s * link.bytes_per_s, fabric) : ring;
}

long long Placement::on_nodes(long long lo, long long hi) const {
  const long long from = std::max(lo, first_node), to = std::min(hi, last_node() + 1);
  if (to <= from || count <= 0) return 0;
  const long long before = (from - first_node) * per_node;  // members on nodes before `from`
  return std::min(count, (to - first_node) * per_node) - std::min(count, before);
}

double all_to_all_uplink_bytes(const Placement& senders, const Placement& receivers, double bytes,
                               const Fabric& fabric) {
  const long long g = fabric.nodes_per_group;
  const long long last = std::max(senders.last_node(), receivers.last_node());
  if (g <= 0 || last < g || receivers.count <= 0) return 0;
  // A group's load changes only where a side starts or ends: the groups
  // holding those nodes, and their neighbours, cover every distinct value.
  const long long marks[] = {
      0,   senders.first_node, senders.last_node(), receivers.first_node, receivers.last_node(),
      last};
  const double s_all = static_cast<double>(senders.count),
               r_all = static_cast<double>(receivers.count);
  double most = 0;
  for (const long long node : marks) {
    for (long long group = node / g - 1; group <= node / g + 1; ++group) {
      if (group < 0 || group * g > last) continue;
      const double s = static_cast<double>(senders.on_nodes(group * g, (group + 1) * g));
      const double r = static_cast<double>(receivers.on_nodes(group * g, (group + 1) * g));
      most = std::max({most, s * (r_all - r) * bytes / r_all, (s_all - s) * r * bytes / r_all});
    }
  }
  return most;
}

}  // namespace dlscale::predict
