#include "dp/bucket_plan.h"

namespace dlscale::dp {

std::vector<std::vector<size_t>> plan_buckets(const std::vector<int64_t>& bytes,
                                              double first_bucket_mb, double bucket_mb) {
  std::vector<std::vector<size_t>> buckets;
  int64_t held = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    const double cap_mb = buckets.size() <= 1 ? first_bucket_mb : bucket_mb;
    if (buckets.empty() || (bucket_mb > 0 && static_cast<double>(held) >= cap_mb * kMiB)) {
      buckets.emplace_back();
      held = 0;
    }
    buckets.back().push_back(i);
    held += bytes[i];
  }
  return buckets;
}

}  // namespace dlscale::dp
