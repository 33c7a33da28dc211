// The one bucket planner (dp/bucket_plan.h) that the bucketed collectives
// and the parameter server's pushes share: PyTorch DDP's rule, exactly.
#include "dp/bucket_plan.h"

#include <gtest/gtest.h>

namespace dlscale::dp {
namespace {

using Buckets = std::vector<std::vector<size_t>>;

TEST(BucketPlan, ABucketClosesOnceItReachesItsCapTheCrossingItemIncluded) {
  const int64_t mib = 1 << 20;
  // First cap 1 MiB, then 2 MiB: [0.5, 0.75] crosses 1 MiB and closes the
  // first bucket; [1, 1] reaches 2 MiB; the rest stays together.
  const std::vector<int64_t> bytes = {mib / 2, 3 * mib / 4, mib, mib, mib / 4, mib / 4};
  EXPECT_EQ(plan_buckets(bytes, 1.0, 2.0), (Buckets{{0, 1}, {2, 3}, {4, 5}}));
  // A cap of 0 MiB: every item a bucket of its own (each closes at once).
  EXPECT_EQ(plan_buckets({4, 4, 4}, 0.0, 1e-9), (Buckets{{0}, {1}, {2}}));
  // bucket_mb 0: one bucket of everything, whatever the first cap.
  EXPECT_EQ(plan_buckets(bytes, 1.0, 0.0), (Buckets{{0, 1, 2, 3, 4, 5}}));
  EXPECT_TRUE(plan_buckets({}, 1.0, 25.0).empty());
  // One item larger than every cap is a bucket alone.
  EXPECT_EQ(plan_buckets({100 * mib, 1}, 1.0, 25.0), (Buckets{{0}, {1}}));
}

}  // namespace
}  // namespace dlscale::dp
