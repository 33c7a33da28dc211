#include "dp/bucket_reducer.h"

#include <gtest/gtest.h>

#include "../comm/comm_test_util.h"
#include "core/error.h"

namespace dlscale::dp {
namespace {

// Parameters of 1, 2, 3 and 4 MiB (float32) in registration order.
std::vector<torch::Tensor> params_mib() {
  std::vector<torch::Tensor> ps;
  for (int64_t mib : {1, 2, 3, 4}) {
    ps.push_back(torch::zeros({mib * 262144}, torch::requires_grad()));
  }
  return ps;
}

// DDP's rule: reverse order, a bucket closes once it reaches its cap, the
// crossing parameter included.
TEST(BucketReducer, BucketsInReverseOrderClosedAtTheCap) {
  comm::testing::run_ranks("inproc", 1, [](comm::Communicator& comm) {
    const int64_t mib = 1 << 20;
    ReducerOptions o;
    o.first_bucket_mb = 4;  // 4 MiB reaches it: alone
    o.bucket_mb = 5;        // 3 (< 5) + 2 = 5 reaches it; then 1
    EXPECT_EQ(BucketReducer(params_mib(), comm, o).bucket_bytes(),
              (std::vector<int64_t>{4 * mib, 5 * mib, 1 * mib}));
    o.first_bucket_mb = 1;  // 4 crosses it: alone
    o.bucket_mb = 4;        // 3 + 2 crosses 4; then 1
    EXPECT_EQ(BucketReducer(params_mib(), comm, o).bucket_bytes(),
              (std::vector<int64_t>{4 * mib, 5 * mib, 1 * mib}));
    o.first_bucket_mb = 6;  // 4 + 3 crosses 6
    o.bucket_mb = 25;       // 2 + 1
    EXPECT_EQ(BucketReducer(params_mib(), comm, o).bucket_bytes(),
              (std::vector<int64_t>{7 * mib, 3 * mib}));
  });
}

TEST(BucketReducer, ZeroBucketSizeIsOneFlatBucket) {
  comm::testing::run_ranks("inproc", 1, [](comm::Communicator& comm) {
    ReducerOptions o;
    o.bucket_mb = 0;
    BucketReducer r(params_mib(), comm, o);
    EXPECT_FALSE(r.overlaps());
    EXPECT_EQ(r.bucket_bytes(), (std::vector<int64_t>{10 << 20}));
  });
}

// Gradients are averaged over ranks; a parameter that receives no gradient
// gets zeros instead of hanging the step.
TEST(BucketReducer, AveragesAndHandlesUnusedParameters) {
  comm::testing::run_ranks("inproc", 2, [](comm::Communicator& comm) {
    torch::Tensor used = torch::ones({3}, torch::requires_grad());
    torch::Tensor unused = torch::ones({2}, torch::requires_grad());
    ReducerOptions o;
    o.bucket_mb = 25;
    BucketReducer r({used, unused}, comm, o);
    for (int step = 0; step < 2; ++step) {
      used.mutable_grad().reset();
      r.begin_step();
      // d/dused of sum(used * (rank + 1)) = rank + 1; mean over ranks 1.5
      (used * static_cast<float>(comm.rank() + 1)).sum().backward();
      const ReducerStepStats s = r.finish_step();
      EXPECT_EQ(s.bytes, 5 * 4);
      EXPECT_TRUE(torch::equal(used.grad(), torch::full({3}, 1.5f)));
      EXPECT_TRUE(torch::equal(unused.grad(), torch::zeros({2})));
    }
  });
}

TEST(BucketReducer, RejectsBadSizes) {
  comm::testing::run_ranks("inproc", 1, [](comm::Communicator& comm) {
    ReducerOptions o;
    o.bucket_mb = -1;
    EXPECT_THROW(BucketReducer(params_mib(), comm, o), Error);
    o.bucket_mb = 1;
    o.first_bucket_mb = 0;
    EXPECT_THROW(BucketReducer(params_mib(), comm, o), Error);
  });
}

}  // namespace
}  // namespace dlscale::dp
