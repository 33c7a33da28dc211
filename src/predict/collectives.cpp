#include "predict/collectives.h"

#include <algorithm>
#include <cmath>

namespace dlscale::predict {

const char* link_name(LinkKind kind) {
  switch (kind) {
    case LinkKind::kIntra: return "intra-node link";
    case LinkKind::kInter: return "inter-node link";
    case LinkKind::kShard: return "ps-shard link";
  }
  return "?";
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

Cost tree_reduce(double bytes, long long ranks, const Link& link, LinkKind kind) {
  // Level l holds ranks 2^l − 1 .. 2^(l+1) − 2; its first rank has the most
  // children: those of 2^(l+1) − 1 and 2^(l+1) that exist.
  double messages = 0;
  for (long long first_child = 1; first_child < ranks; first_child = 2 * first_child + 1) {
    messages += static_cast<double>(std::min<long long>(2, ranks - first_child));
  }
  return terms(messages, messages * bytes, link, kind);
}

Cost ring_reduce_scatter(double bytes, long long ranks, const Link& link, LinkKind kind) {
  if (ranks <= 1) return {};
  const double p = static_cast<double>(ranks);
  return terms(p - 1, (p - 1) / p * bytes, link, kind);
}

}  // namespace dlscale::predict
