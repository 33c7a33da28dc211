// The noise probe's Adam-preconditioned estimate against values computed by
// hand: Adam's P^2 after one step, and the two batch sizes' weighted
// squared norms of one worker's micro-batches (docs/convergence.md, "The
// noise scale Adam sees").
#include <gtest/gtest.h>

#include "libtorch/train/noise_scale.h"
#include "libtorch/train/optimizer.h"

namespace dlscale::train {
namespace {

std::vector<torch::Tensor> make_params() {
  return {torch::tensor({1.0f, -2.0f, 0.5f}).requires_grad_(true),
          torch::tensor({{0.25f, 3.0f}, {-1.0f, 2.0f}}).requires_grad_(true)};
}

// One Adam step from gradient g0: v = (1 - beta2) g0^2, corrected g0^2, so
// P^2 = 1 / (|g0| + eps)^2.
TEST(NoiseProbe, AdamsPreconditionerAfterOneStep) {
  std::vector<torch::Tensor> params = make_params();
  const std::vector<torch::Tensor> g0 = {torch::tensor({0.5f, -4.0f, 2.0f}),
                                         torch::tensor({{1.0f, -0.125f}, {3.0f, 0.0f}})};
  torch::optim::Adam adam(std::vector<torch::Tensor>{params[0]}, torch::optim::AdamOptions(0.01));
  adam.add_param_group(torch::optim::OptimizerParamGroup({params[1]}));
  EXPECT_TRUE(adam_preconditioner_squares(adam, params).empty());  // not stepped yet
  for (size_t k = 0; k < params.size(); ++k) params[k].mutable_grad() = g0[k].clone();
  adam.step();
  const std::vector<torch::Tensor> squares = adam_preconditioner_squares(adam, params);
  ASSERT_EQ(squares.size(), 2u);
  for (size_t k = 0; k < params.size(); ++k) {
    const torch::Tensor expected = (g0[k].abs() + 1e-8).reciprocal().square();
    EXPECT_TRUE(torch::allclose(squares[k], expected, 1e-5, 0)) << squares[k] << expected;
  }
  // A tensor the optimizer does not train has no weight.
  std::vector<torch::Tensor> with_frozen = params;
  with_frozen.push_back(torch::ones({2}));
  const std::vector<torch::Tensor> partial = adam_preconditioner_squares(adam, with_frozen);
  ASSERT_EQ(partial.size(), 3u);
  EXPECT_FALSE(partial[2].defined());
  torch::optim::SGD sgd(params, torch::optim::SGDOptions(0.1).momentum(0.9));
  sgd.step();
  EXPECT_TRUE(adam_preconditioner_squares(sgd, params).empty());
}

// One worker, 2 micro-batches of 4 samples: the small batch is micro-batch
// 0 (its gradient c0, the loss counted 1/2), the large one the step's
// gradient (c0 + c1) / 2. Each step's estimates (McCandlish et al. A.1):
// |G|^2 = (8 big - 4 small) / 4, tr(Sigma) = (small - big) / (1/4 - 1/8).
TEST(NoiseProbe, WeighsBothBatchSizesByAdamsPreconditioner) {
  std::vector<torch::Tensor> params = make_params();
  const std::vector<torch::Tensor> c0 = {torch::tensor({1.0f, 2.0f, -1.0f}),
                                         torch::tensor({{0.5f, -1.0f}, {2.0f, 1.0f}})};
  const std::vector<torch::Tensor> c1 = {torch::tensor({3.0f, -2.0f, 0.0f}),
                                         torch::tensor({{1.5f, 1.0f}, {-2.0f, 3.0f}})};
  const std::vector<torch::Tensor> w = {torch::tensor({1.0f, 0.25f, 4.0f}),
                                        torch::tensor({{2.0f, 0.5f}, {1.0f, 0.125f}})};
  NoiseProbe probe(params, 1, 2, 4, 1);
  probe.set_preconditioner(w);
  for (int64_t m = 0; m < 2; ++m) {
    const auto& c = m == 0 ? c0 : c1;
    probe.begin_backward(m, 1.0);
    ((params[0] * c[0]).sum() / 2 + (params[1] * c[1]).sum() / 2).backward();
    probe.end_backward();
  }
  double big = 0, big_w = 0, small = 0, small_w = 0;
  for (size_t k = 0; k < 2; ++k) {
    const torch::Tensor g = (c0[k] + c1[k]) / 2;
    ASSERT_TRUE(torch::allclose(params[k].grad(), g));
    big += g.square().sum().item<double>();
    big_w += (w[k] * g.square()).sum().item<double>();
    small += c0[k].square().sum().item<double>();
    small_w += (w[k] * c0[k].square()).sum().item<double>();
  }
  // Float32 dot products, as B_simple's squared norms.
  EXPECT_NEAR(probe.averaged_weighted_sq(params), big_w, 1e-6 * big_w);
  probe.finish_step(0, big, probe.averaged_weighted_sq(params), nullptr);
  const nlohmann::json r = probe.report();
  const nlohmann::json& p = r["preconditioned"];
  ASSERT_TRUE(p.is_object()) << r.dump();
  EXPECT_EQ(p["steps"], 1);
  EXPECT_NEAR(p["gradient_sq"].get<double>(), (8 * big_w - 4 * small_w) / 4, 1e-5 * small_w);
  EXPECT_NEAR(p["trace_sigma"].get<double>(), (small_w - big_w) / (0.25 - 0.125),
              1e-5 * small_w / 0.125);
  EXPECT_NEAR(r["gradient_sq"].get<double>(), (8 * big - 4 * small) / 4, 1e-6);
  EXPECT_NEAR(r["trace_sigma"].get<double>(), (small - big) / (0.25 - 0.125), 1e-6);
  EXPECT_NE(r["summary"].get<std::string>().find("; Adam-preconditioned "), std::string::npos);
  // A step without a preconditioner adds to B_simple only.
  probe.set_preconditioner({});
  for (int64_t m = 0; m < 2; ++m) {
    probe.begin_backward(m, 1.0);
    (params[0].sum() + params[1].sum()).backward();
    probe.end_backward();
  }
  EXPECT_TRUE(std::isnan(probe.averaged_weighted_sq(params)));
  probe.finish_step(1, big, std::nan(""), nullptr);
  EXPECT_EQ(probe.report()["steps"], 2);
  EXPECT_EQ(probe.report()["preconditioned"]["steps"], 1);
}

}  // namespace
}  // namespace dlscale::train
