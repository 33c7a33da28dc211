#include "libtorch/dp/grad_clip.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "comm/comm_test_util.h"

namespace dlscale::dp {
namespace {

std::vector<torch::Tensor> gradients(uint64_t seed, double scale) {
  torch::manual_seed(seed);
  return {torch::randn({7, 5}) * scale, torch::randn({5}) * scale, torch::Tensor(), torch::randn({3, 2, 2}) * scale};
}

std::vector<torch::Tensor> clones(const std::vector<torch::Tensor>& grads) {
  std::vector<torch::Tensor> out;
  for (const auto& g : grads) out.push_back(g.defined() ? g.clone() : g);
  return out;
}

// The same norm and the same scaled gradients as LibTorch's
// clip_grad_norm_ (PyTorch's), above the bound and below it.
TEST(GradClip, IsLibTorchsClipGradNorm) {
  for (const double scale : {10.0, 0.01}) {
    SCOPED_TRACE(scale);
    const std::vector<torch::Tensor> mine = gradients(3, scale);
    std::vector<torch::Tensor> params;
    for (const auto& g : clones(mine)) {
      if (!g.defined()) continue;
      torch::Tensor p = torch::zeros_like(g).requires_grad_(true);
      p.mutable_grad() = g;
      params.push_back(p);
    }
    const double expected = torch::nn::utils::clip_grad_norm_(params, 1.0);
    const double norm = clip_grad_norm(mine, 1.0);
    EXPECT_NEAR(norm, expected, 1e-5 * expected);
    size_t k = 0;
    for (const auto& g : mine) {
      if (!g.defined()) continue;
      EXPECT_TRUE(torch::allclose(g, params[k++].grad(), 1e-6, 1e-9));
    }
    if (scale == 0.01) {
      EXPECT_LT(norm, 1.0);  // below the bound: untouched
      EXPECT_TRUE(torch::equal(mine[0], gradients(3, scale)[0]));
    }
  }
}

// Sharded: each of 3 workers (real ranks over Gloo) holds a piece of every
// gradient; the squares summed over the workers give the whole norm, to the
// last bits, and each scales its own pieces by the whole's coefficient.
TEST(GradClip, ShardsSumTheirSquaresOverTheWorkers) {
  constexpr int kWorkers = 3;
  const std::vector<torch::Tensor> whole = clones(gradients(5, 4.0));
  std::vector<std::vector<torch::Tensor>> pieces(kWorkers);
  for (const auto& g : whole) {
    if (!g.defined()) continue;
    const torch::Tensor flat = g.reshape({-1});
    const int64_t n = flat.numel(), step = (n + kWorkers - 1) / kWorkers;
    for (int r = 0; r < kWorkers; ++r) {
      const int64_t lo = std::min(n, r * step), hi = std::min(n, lo + step);
      pieces[r].push_back(flat.narrow(0, lo, hi - lo).clone());
    }
  }
  const std::vector<torch::Tensor> reference = clones(whole);
  const double norm = clip_grad_norm(reference, 2.0);
  std::vector<double> norms(kWorkers);
  comm::testing::run_ranks("gloo", kWorkers, [&](comm::Communicator& c) {
    const auto sum = [&c](torch::Tensor& t) {
      EXPECT_EQ(t.scalar_type(), torch::kFloat32);  // what communicators reduce
      c.allreduce(t, comm::ReduceOp::kSum);
    };
    norms[c.rank()] = clip_grad_norm(pieces[c.rank()], 2.0, [&](double local) {
      return sum_doubles_over_workers(local, c.rank(), c.size(), sum);
    });
  });
  for (int r = 0; r < kWorkers; ++r) {
    EXPECT_EQ(norms[r], norms[0]) << "every worker the same norm, to the bit";
    EXPECT_NEAR(norms[r], norm, 1e-12 * norm) << "float64 sums: only their order differs";
  }
  size_t k = 0;
  for (const auto& g : reference) {
    if (!g.defined()) continue;
    std::vector<torch::Tensor> parts;
    for (int r = 0; r < kWorkers; ++r) parts.push_back(pieces[r][k]);
    EXPECT_TRUE(torch::allclose(torch::cat(parts).view_as(g), g, 1e-7, 0)) << k;
    ++k;
  }
}

// A float64 crosses a float32 allreduce as its value and its rest, in slots
// of its own: the sum is exact to 2^-48 of each value, whatever the spread.
TEST(GradClip, DoublesCrossAFloatAllreduceWithoutLosingTheirLowBits) {
  const std::vector<double> values = {1.0 + 1e-12, 3.0e7 + 0.123456789, 1e-9};
  std::vector<double> sums(values.size());
  comm::testing::run_ranks("inproc", static_cast<int>(values.size()), [&](comm::Communicator& c) {
    sums[c.rank()] = sum_doubles_over_workers(values[c.rank()], c.rank(), c.size(), [&c](torch::Tensor& t) {
      c.allreduce(t, comm::ReduceOp::kSum);
    });
  });
  const double exact = values[0] + values[1] + values[2];
  for (const double s : sums) EXPECT_NEAR(s, exact, 1e-13 * exact);
  // float32 alone would have lost the 1e-12 and most of .123456789.
  EXPECT_GT(std::abs(static_cast<double>(static_cast<float>(values[1])) - values[1]), 1e-3);
}

}  // namespace
}  // namespace dlscale::dp
