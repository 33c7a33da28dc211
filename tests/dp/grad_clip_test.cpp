#include "dp/grad_clip.h"

#include <gtest/gtest.h>

#include <cmath>

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

// Sharded: each worker holds a piece of every gradient; the squares summed
// over the workers give the whole norm, and each scales its own pieces by
// the whole's coefficient.
TEST(GradClip, ShardsSumTheirSquaresOverTheWorkers) {
  const std::vector<torch::Tensor> whole = clones(gradients(5, 4.0));
  std::vector<torch::Tensor> first, second;
  for (const auto& g : whole) {
    if (!g.defined()) continue;
    const torch::Tensor flat = g.reshape({-1});
    const int64_t half = flat.numel() / 2;
    first.push_back(flat.narrow(0, 0, half).clone());
    second.push_back(flat.narrow(0, half, flat.numel() - half).clone());
  }
  auto squares = [](const std::vector<torch::Tensor>& pieces) {
    double sum = 0;
    for (const auto& p : pieces) sum += p.to(torch::kFloat64).square().sum().item<double>();
    return sum;
  };
  const double second_squares = squares(second);
  const double first_squares = squares(first);
  const std::vector<torch::Tensor> reference = clones(whole);
  const double norm = clip_grad_norm(reference, 2.0);
  auto add = [](double others) {
    return [others](torch::Tensor& t) {
      EXPECT_EQ(t.scalar_type(), torch::kFloat32);  // what communicators reduce
      t += others;
    };
  };
  const double a = clip_grad_norm(first, 2.0, add(second_squares));
  const double b = clip_grad_norm(second, 2.0, add(first_squares));
  EXPECT_NEAR(a, norm, 1e-6 * norm);
  EXPECT_NEAR(b, norm, 1e-6 * norm);
  size_t k = 0;
  for (const auto& g : reference) {
    if (!g.defined()) continue;
    const torch::Tensor joined = torch::cat({first[k], second[k]}).view_as(g);
    EXPECT_TRUE(torch::allclose(joined, g, 1e-6, 1e-9)) << k;
    ++k;
  }
}

}  // namespace
}  // namespace dlscale::dp
