// The bucket collectives of every strategy, on several real ranks (threads
// over inproc and over Gloo on loopback): exact sums for known inputs, any
// rank count, every wire dtype; and their byte formulas.
#include <gtest/gtest.h>

#include "../comm/comm_test_util.h"
#include "libtorch/dp/bucket_collective.h"
#include "libtorch/dp/tree_collective.h"

namespace dlscale::dp {
namespace {

struct Case {
  std::string backend;
  std::string strategy;
  int ranks_per_node;  // hierarchical: 0 = by name ("n" + rank / 2)
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.backend << " " << c.strategy << " rpn=" << c.ranks_per_node;
}

class CollectiveTest : public ::testing::TestWithParam<Case> {};

// Rank r contributes (r + 1) * (i + 1) at index i: the sum is a known
// integer, exact in float32 (any size here), float16 and bfloat16 (n <= 16).
TEST_P(CollectiveTest, SumsExactlyOnAnyRankCountAndDtype) {
  const Case c = GetParam();
  for (int size = 1; size <= 5; ++size) {
    SCOPED_TRACE(size);
    comm::testing::run_ranks(c.backend, size, [&](comm::Communicator& comm) {
      auto coll = make_bucket_collective(c.strategy, comm, c.ranks_per_node,
                                         "n" + std::to_string(comm.rank() / 2));
      // bfloat16 holds integers exactly up to 256: n <= 16 keeps every sum below.
      for (const auto dtype : {torch::kFloat32, torch::kFloat16, torch::kBFloat16}) {
        for (const int64_t n : {int64_t{1}, int64_t{7}, int64_t{16}, int64_t{100000}}) {
          if (n > 16 && dtype != torch::kFloat32) continue;
          torch::Tensor t =
              (torch::arange(1, n + 1, torch::kFloat32) * (comm.rank() + 1)).to(dtype);
          coll->sum(t, static_cast<uint32_t>(n));
          const torch::Tensor expected =
              torch::arange(1, n + 1, torch::kFloat32) * (size * (size + 1) / 2);
          EXPECT_TRUE(torch::equal(t.to(torch::kFloat32), expected))
              << c10::toString(dtype) << " n=" << n << " rank " << comm.rank();
        }
      }
      if (c.strategy == "hierarchical") {
        EXPECT_EQ(coll->nodes(), (size + 1) / 2);
      }
    });
  }
}

// Several buckets in flight with distinct tags, summed in order.
TEST_P(CollectiveTest, ConsecutiveBucketsKeepTheirTags) {
  const Case c = GetParam();
  comm::testing::run_ranks(c.backend, 3, [&](comm::Communicator& comm) {
    auto coll = make_bucket_collective(c.strategy, comm, c.ranks_per_node,
                                       "n" + std::to_string(comm.rank() / 2));
    for (uint32_t b = 0; b < 6; ++b) {
      torch::Tensor t = torch::full({1000}, static_cast<float>(b + comm.rank()));
      coll->sum(t, b);
      EXPECT_TRUE(torch::equal(t, torch::full({1000}, static_cast<float>(3 * b + 3))));
    }
  });
}

std::string case_name(const ::testing::TestParamInfo<Case>& p) {
  return p.param.backend + "_" + p.param.strategy + std::to_string(p.param.ranks_per_node);
}

INSTANTIATE_TEST_SUITE_P(
    Strategies, CollectiveTest,
    ::testing::Values(Case{"inproc", "allreduce", 0}, Case{"inproc", "tree", 0},
                      Case{"inproc", "hierarchical", 0}, Case{"inproc", "hierarchical", 2},
                      Case{"gloo", "allreduce", 0}, Case{"gloo", "tree", 0},
                      Case{"gloo", "hierarchical", 0}, Case{"gloo", "hierarchical", 2}),
    case_name);

// Rank r of a binary tree sends S up (r > 0) and S to each child.
TEST(Collectives, ByteFormulas) {
  EXPECT_EQ(tree_children(0, 5), 2);
  EXPECT_EQ(tree_children(1, 5), 2);
  EXPECT_EQ(tree_children(2, 5), 0);
  EXPECT_EQ(tree_children(1, 4), 1);
  comm::testing::run_ranks("inproc", 5, [](comm::Communicator& comm) {
    const double s = 1000;
    const double tree[] = {2 * s, 3 * s, s, s, s};
    EXPECT_EQ(make_bucket_collective("tree", comm, 0, "")->bytes_sent(s), tree[comm.rank()]);
    EXPECT_DOUBLE_EQ(make_bucket_collective("allreduce", comm, 0, "")->bytes_sent(s), 1.6 * s);
    // Nodes {0,1}, {2,3}, {4}: leaders 0, 2, 4 also allreduce among 3.
    const double in_node[] = {s, s, s, s, 0};
    const double leader = comm.rank() % 2 == 0 ? 2.0 * 2 / 3 * s : 0.0;
    EXPECT_DOUBLE_EQ(make_bucket_collective("hierarchical", comm, 2, "")->bytes_sent(s),
                     in_node[comm.rank()] + leader);
  });
}

}  // namespace
}  // namespace dlscale::dp
