#include "libtorch/dp/bucketed_sync.h"

#include <gtest/gtest.h>

#include <atomic>

#include "../comm/comm_test_util.h"
#include "core/error.h"
#include "libtorch/dp/allreduce_collective.h"

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

std::unique_ptr<BucketedSync> make_sync(std::vector<torch::Tensor> params, comm::Communicator& comm,
                                        const SyncOptions& o) {
  return std::make_unique<BucketedSync>(std::move(params), comm, make_allreduce_collective(comm),
                                        o);
}

// DDP's rule: reverse order, a bucket closes once it reaches its cap, the
// crossing parameter included.
TEST(BucketedSync, BucketsInReverseOrderClosedAtTheCap) {
  comm::testing::run_ranks("inproc", 1, [](comm::Communicator& comm) {
    const int64_t mib = 1 << 20;
    SyncOptions o;
    o.first_bucket_mb = 4;  // 4 MiB reaches it: alone
    o.bucket_mb = 5;        // 3 (< 5) + 2 = 5 reaches it; then 1
    EXPECT_EQ(make_sync(params_mib(), comm, o)->bucket_bytes(),
              (std::vector<int64_t>{4 * mib, 5 * mib, 1 * mib}));
    o.first_bucket_mb = 1;  // 4 crosses it: alone
    o.bucket_mb = 4;        // 3 + 2 crosses 4; then 1
    EXPECT_EQ(make_sync(params_mib(), comm, o)->bucket_bytes(),
              (std::vector<int64_t>{4 * mib, 5 * mib, 1 * mib}));
    o.first_bucket_mb = 6;  // 4 + 3 crosses 6
    o.bucket_mb = 25;       // 2 + 1
    EXPECT_EQ(make_sync(params_mib(), comm, o)->bucket_bytes(),
              (std::vector<int64_t>{7 * mib, 3 * mib}));
  });
}

TEST(BucketedSync, ZeroBucketSizeIsOneFlatBucket) {
  comm::testing::run_ranks("inproc", 1, [](comm::Communicator& comm) {
    SyncOptions o;
    o.bucket_mb = 0;
    auto r = make_sync(params_mib(), comm, o);
    EXPECT_FALSE(r->overlaps());
    EXPECT_EQ(r->bucket_bytes(), (std::vector<int64_t>{10 << 20}));
    EXPECT_EQ(r->info().layout, "flat");
  });
}

// Gradients are averaged over ranks; a parameter that receives no gradient
// gets zeros instead of hanging the step.
TEST(BucketedSync, AveragesAndHandlesUnusedParameters) {
  comm::testing::run_ranks("inproc", 2, [](comm::Communicator& comm) {
    torch::Tensor used = torch::ones({3}, torch::requires_grad());
    torch::Tensor unused = torch::ones({2}, torch::requires_grad());
    SyncOptions o;
    o.bucket_mb = 25;
    auto r = make_sync({used, unused}, comm, o);
    for (int step = 0; step < 2; ++step) {
      used.mutable_grad().reset();
      r->begin_backward();
      // d/dused of sum(used * (rank + 1)) = rank + 1; mean over ranks 1.5
      (used * static_cast<float>(comm.rank() + 1)).sum().backward();
      const SyncStepStats s = r->end_backward();
      EXPECT_EQ(s.bytes, 5 * 4);
      EXPECT_TRUE(torch::equal(used.grad(), torch::full({3}, 1.5f)));
      EXPECT_TRUE(torch::equal(unused.grad(), torch::zeros({2})));
    }
  });
}

TEST(BucketedSync, RejectsBadSizes) {
  comm::testing::run_ranks("inproc", 1, [](comm::Communicator& comm) {
    SyncOptions o;
    o.bucket_mb = -1;
    EXPECT_THROW(make_sync(params_mib(), comm, o), Error);
    o.bucket_mb = 1;
    o.first_bucket_mb = 0;
    EXPECT_THROW(make_sync(params_mib(), comm, o), Error);
  });
}

// Compressed buckets travel in the 16-bit type (half the bytes) and come
// back as float32 means, rounded once to the wire type.
TEST(BucketedSync, CompressionHalvesTheBytesAndRoundsToTheWireType) {
  for (const auto compress : {Compression::kFp16, Compression::kBf16}) {
    comm::testing::run_ranks("inproc", 2, [&](comm::Communicator& comm) {
      torch::Tensor w = torch::ones({5}, torch::requires_grad());
      SyncOptions o;
      o.compress = compress;
      auto r = make_sync({w}, comm, o);
      EXPECT_EQ(r->bucket_bytes(), (std::vector<int64_t>{5 * 2}));
      EXPECT_EQ(r->info().wire_dtype, compress == Compression::kFp16 ? "float16" : "bfloat16");
      r->begin_backward();
      // Gradient 1/3 + rank; mean over 2 ranks = 1/3 + 0.5, each half rounded to the wire type.
      (w * (1.0f / 3 + static_cast<float>(comm.rank()))).sum().backward();
      r->end_backward();
      const auto wire = compress == Compression::kFp16 ? torch::kFloat16 : torch::kBFloat16;
      const torch::Tensor half0 = torch::full({5}, (1.0f / 3) / 2).to(wire);
      const torch::Tensor half1 = torch::full({5}, (1.0f / 3 + 1) / 2).to(wire);
      const torch::Tensor expected =
          (half0.to(torch::kFloat32) + half1.to(torch::kFloat32)).to(wire).to(torch::kFloat32);
      EXPECT_TRUE(torch::equal(w.grad(), expected)) << w.grad() << expected;
      EXPECT_FALSE(torch::equal(w.grad(), torch::full({5}, 1.0f / 3 + 0.5f)));
    });
  }
}

/// A collective that fails on its first call and counts every call.
class FailingCollective : public BucketCollective {
 public:
  explicit FailingCollective(std::atomic<int>& calls) : calls_(calls) {}
  std::string name() const override { return "failing"; }
  void sum(torch::Tensor&, uint32_t) override {
    ++calls_;
    throw PeerFailure("rank 0: injected failure");
  }
  double bytes_sent(double) const override { return 0; }
  std::string formula() const override { return "0"; }

 private:
  std::atomic<int>& calls_;
};

// After a collective fails, the remaining buckets issue no collective (each
// would wait out its own timeout) and every later step rethrows at once.
TEST(BucketedSync, NoCollectiveAfterAFailure) {
  comm::testing::run_ranks("inproc", 1, [](comm::Communicator& comm) {
    std::atomic<int> calls{0};
    SyncOptions o;
    o.first_bucket_mb = 1;
    o.bucket_mb = 1;
    BucketedSync r(params_mib(), comm, std::make_unique<FailingCollective>(calls), o);
    ASSERT_EQ(r.num_buckets(), 4u);
    for (int step = 0; step < 2; ++step) {
      r.begin_backward();
      EXPECT_THROW(r.end_backward(), PeerFailure);
    }
    EXPECT_EQ(calls.load(), 1);
  });
}

}  // namespace
}  // namespace dlscale::dp
