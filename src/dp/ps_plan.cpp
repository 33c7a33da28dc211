#include "dp/ps_plan.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"
#include "dp/bucket_plan.h"

namespace dlscale::dp {
namespace {

/// The units to place, in registration order (pieces of a split parameter
/// in element order).
std::vector<PsPiece> make_units(const std::vector<int64_t>& numels, double partition_mb,
                                int64_t element_bytes) {
  std::vector<PsPiece> units;
  const auto cap = static_cast<int64_t>(partition_mb * kMiB / static_cast<double>(element_bytes));
  for (size_t k = 0; k < numels.size(); ++k) {
    const int64_t n = numels[k];
    const int64_t parts = partition_mb > 0 && cap > 0 ? std::max<int64_t>(1, (n + cap - 1) / cap) : 1;
    for (int64_t i = 0; i < parts; ++i) {
      PsPiece u;
      u.param = static_cast<int>(k);
      u.offset = n * i / parts;
      u.length = n * (i + 1) / parts - u.offset;
      units.push_back(u);
    }
  }
  return units;
}

void assign_units(std::vector<PsPiece>& units, int shards, PsAssign assign) {
  if (assign == PsAssign::kRoundRobin) {
    for (size_t i = 0; i < units.size(); ++i) units[i].shard = static_cast<int>(i % shards);
    return;
  }
  std::vector<size_t> order(units.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return units[a].length > units[b].length; });
  std::vector<int64_t> load(shards, 0);
  for (size_t i : order) {
    const auto least = std::min_element(load.begin(), load.end()) - load.begin();
    units[i].shard = static_cast<int>(least);
    load[least] += units[i].length;
  }
}

/// Lays out one shard's pieces in reverse parameter order and cuts buckets.
void layout_shard(PsPlan& plan, int s, double bucket_mb, double first_bucket_mb) {
  PsShardPlan& shard = plan.shards[s];
  for (size_t i = 0; i < plan.pieces.size(); ++i) {
    if (plan.pieces[i].shard == s) shard.pieces.push_back(i);
  }
  std::stable_sort(shard.pieces.begin(), shard.pieces.end(), [&](size_t a, size_t b) {
    return plan.pieces[a].param > plan.pieces[b].param;
  });
  std::vector<int64_t> bytes;
  for (size_t i : shard.pieces) bytes.push_back(plan.pieces[i].length * plan.element_bytes);
  int64_t offset = 0;
  for (const std::vector<size_t>& members : plan_buckets(bytes, first_bucket_mb, bucket_mb)) {
    shard.buckets.push_back({offset, 0});
    for (size_t m : members) {
      PsPiece& piece = plan.pieces[shard.pieces[m]];
      piece.shard_offset = offset;
      piece.bucket = static_cast<int>(shard.buckets.size() - 1);
      shard.buckets.back().length += piece.length;
      offset += piece.length;
    }
  }
  shard.elements = offset;
}

}  // namespace

double PsPlan::imbalance() const {
  if (shards.empty()) return 1.0;
  int64_t total = 0;
  int64_t most = 0;
  for (const auto& s : shards) {
    total += s.elements;
    most = std::max(most, s.elements);
  }
  return total == 0 ? 1.0 : static_cast<double>(most) * shards.size() / total;
}

PsPlan plan_ps(const std::vector<int64_t>& numels, int shards, PsAssign assign,
               double partition_mb, double bucket_mb, double first_bucket_mb,
               int64_t element_bytes) {
  DLSCALE_CHECK(shards >= 1, "--ps-shards must be >= 1 (got {})", shards);
  DLSCALE_ASSERT(element_bytes >= 1);
  PsPlan plan;
  plan.element_bytes = element_bytes;
  plan.pieces = make_units(numels, partition_mb, element_bytes);
  DLSCALE_CHECK(static_cast<size_t>(shards) <= plan.pieces.size(),
                "--ps-shards {} is more than the {} variables to place{}; use fewer shards", shards,
                plan.pieces.size(), partition_mb > 0 ? "" : " (or split them with --ps-partition-mb)");
  assign_units(plan.pieces, shards, assign);
  plan.shards.resize(shards);
  for (int s = 0; s < shards; ++s) layout_shard(plan, s, bucket_mb, first_bucket_mb);
  plan.pieces_of_param.resize(numels.size());
  for (size_t i = 0; i < plan.pieces.size(); ++i) {
    plan.pieces_of_param[plan.pieces[i].param].push_back(i);
  }
  return plan;
}

}  // namespace dlscale::dp
