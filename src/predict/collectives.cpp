#include "predict/collectives.h"

#include <algorithm>
#include <cmath>

namespace dlscale::predict {

const Link& Network::flat_link(long long ranks) const { return nodes(ranks) > 1 ? inter : intra; }

long long Network::nodes(long long ranks) const {
  const long long per = std::max(1, workers_per_node);
  return (ranks + per - 1) / per;
}

Cost& Cost::add(const Cost& other) {
  if (link.empty() || other.transfer_s > transfer_s) link = other.link.empty() ? link : other.link;
  latency_s += other.latency_s;
  transfer_s += other.transfer_s;
  cast_s += other.cast_s;
  return *this;
}

namespace {

Cost terms(double messages, double bytes, const Link& link, const char* name) {
  Cost c;
  c.latency_s = messages * link.alpha_s;
  c.transfer_s = bytes / link.bytes_per_s;
  c.link = name;
  return c;
}

}  // namespace

Cost ring_allreduce(double bytes, long long ranks, const Link& link, const char* name) {
  if (ranks <= 1) return {};
  const double p = static_cast<double>(ranks);
  return terms(2 * (p - 1), 2 * (p - 1) / p * bytes, link, name);
}

Cost halving_doubling_allreduce(double bytes, long long ranks, const Link& link, const char* name) {
  if (ranks <= 1) return {};
  const double p = static_cast<double>(ranks);
  return terms(2 * std::ceil(std::log2(p) - 1e-12), 2 * (p - 1) / p * bytes, link, name);
}

Cost tree_reduce(double bytes, long long ranks, const Link& link, const char* name) {
  // Level l holds ranks 2^l − 1 .. 2^(l+1) − 2; its first rank has the most
  // children: those of 2^(l+1) − 1 and 2^(l+1) that exist.
  double messages = 0;
  for (long long first_child = 1; first_child < ranks; first_child = 2 * first_child + 1) {
    messages += static_cast<double>(std::min<long long>(2, ranks - first_child));
  }
  return terms(messages, messages * bytes, link, name);
}

Cost ring_reduce_scatter(double bytes, long long ranks, const Link& link, const char* name) {
  if (ranks <= 1) return {};
  const double p = static_cast<double>(ranks);
  return terms(p - 1, (p - 1) / p * bytes, link, name);
}

}  // namespace dlscale::predict
