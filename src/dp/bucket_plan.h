#pragma once
// How gradients are cut into buckets, for every strategy that buckets them
// (the bucketed collectives and the parameter server's pushes). No LibTorch.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace dlscale::dp {

inline constexpr double kMiB = 1024.0 * 1024.0;

/// Cuts items of `bytes` each, in the order their gradients become ready
/// (about reverse registration order), into buckets the way PyTorch DDP
/// does: a bucket closes once it holds `first_bucket_mb` MiB (the first
/// bucket) or `bucket_mb` MiB (the others), the item that crosses the cap
/// included, so a large gradient starts its collective right after it is
/// produced. `bucket_mb` = 0 gives one bucket of everything. Returns each
/// bucket's item positions, in order; no bucket is empty.
std::vector<std::vector<size_t>> plan_buckets(const std::vector<int64_t>& bytes,
                                              double first_bucket_mb, double bucket_mb);

}  // namespace dlscale::dp
