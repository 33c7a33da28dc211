// The multi-tensor SGD against LibTorch's SGD: the same weights bit for bit
// over several steps, for every form (plain, momentum, Nesterov, weight
// decay, dampening, two groups, a parameter without a gradient, a learning
// rate that changes), gradients left as they were, and state that either
// optimizer's checkpoint restores into the other.
#include "libtorch/train/multi_tensor_sgd.h"

#include <gtest/gtest.h>

#include <sstream>

#include "libtorch/train/optimizer.h"

namespace dlscale::train {
namespace {

using torch::optim::OptimizerParamGroup;
using torch::optim::SGDOptions;

std::vector<torch::Tensor> make_params() {
  torch::manual_seed(7);
  std::vector<torch::Tensor> params = {torch::randn({4, 3}), torch::randn({3}), torch::randn({2, 2, 3}),
                                       torch::randn({5})};
  for (auto& p : params) p.requires_grad_(true);
  return params;
}

std::vector<torch::Tensor> clones(const std::vector<torch::Tensor>& params) {
  std::vector<torch::Tensor> out;
  for (const auto& p : params) out.push_back(p.detach().clone().requires_grad_(true));
  return out;
}

/// Gradients of step `step` (the last parameter gets none on odd steps).
void set_grads(std::vector<torch::Tensor>& params, int step) {
  for (size_t i = 0; i < params.size(); ++i) {
    if (i == params.size() - 1 && step % 2 == 1) {
      params[i].mutable_grad() = torch::Tensor();
      continue;
    }
    const torch::Tensor g = torch::sin(torch::arange(params[i].numel(), torch::kFloat) * (step + 1.0 + i))
                                .reshape(params[i].sizes());
    params[i].mutable_grad() = g.clone();
  }
}

std::vector<OptimizerParamGroup> groups_of(const std::vector<torch::Tensor>& params, const SGDOptions& full) {
  // Two groups, as --wd-exclude makes them: the second without weight decay.
  SGDOptions light = full;
  light.weight_decay(0);
  return {OptimizerParamGroup({params[0], params[2]}, std::make_unique<SGDOptions>(full)),
          OptimizerParamGroup({params[1], params[3]}, std::make_unique<SGDOptions>(light))};
}

void expect_same(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i], b[i])) << what << " tensor " << i;
}

TEST(MultiTensorSgd, MatchesLibTorchsSgdBitForBit) {
  const std::vector<std::pair<std::string, SGDOptions>> forms = {
      {"plain", SGDOptions(0.1)},
      {"weight decay", SGDOptions(0.1).weight_decay(1e-2)},
      {"momentum", SGDOptions(0.05).momentum(0.9)},
      {"momentum + decay + dampening", SGDOptions(0.05).momentum(0.9).weight_decay(5e-4).dampening(0.1)},
      {"nesterov", SGDOptions(0.05).momentum(0.9).nesterov(true)},
      {"nesterov + decay", SGDOptions(0.05).momentum(0.9).nesterov(true).weight_decay(5e-4)}};
  for (const auto& [name, options] : forms) {
    std::vector<torch::Tensor> ours = make_params(), theirs = clones(ours);
    MultiTensorSgd fast(groups_of(ours, options), SGDOptions(0.1));
    torch::optim::SGD reference(groups_of(theirs, options), SGDOptions(0.1));
    for (int step = 0; step < 6; ++step) {
      if (step == 3) {
        set_learning_rate(fast, 0.02);
        set_learning_rate(reference, 0.02);
      }
      set_grads(ours, step);
      set_grads(theirs, step);
      std::vector<torch::Tensor> grads_before;
      for (const auto& p : ours) grads_before.push_back(p.grad().defined() ? p.grad().clone() : torch::Tensor());
      fast.step();
      reference.step();
      expect_same(ours, theirs, name + " step " + std::to_string(step));
      for (size_t i = 0; i < ours.size(); ++i) {
        if (grads_before[i].defined()) {
          EXPECT_TRUE(torch::equal(ours[i].grad(), grads_before[i])) << name;
        }
      }
    }
  }
}

TEST(MultiTensorSgd, CheckpointsAreSgdsOwnBothWays) {
  const SGDOptions options = SGDOptions(0.05).momentum(0.9).nesterov(true).weight_decay(5e-4);
  std::vector<torch::Tensor> a = make_params(), b = clones(a);
  MultiTensorSgd fast(groups_of(a, options), SGDOptions(0.1));
  torch::optim::SGD reference(groups_of(b, options), SGDOptions(0.1));
  for (int step = 0; step < 2; ++step) {
    set_grads(a, step);
    set_grads(b, step);
    fast.step();
    reference.step();
  }
  // Each one's state restored into a fresh optimizer of the other kind.
  std::vector<torch::Tensor> a2 = clones(a), b2 = clones(b);
  torch::optim::SGD from_fast(groups_of(a2, options), SGDOptions(0.1));
  MultiTensorSgd from_reference(groups_of(b2, options), SGDOptions(0.1));
  for (auto [source, target] : {std::pair<torch::optim::Optimizer*, torch::optim::Optimizer*>{&fast, &from_fast},
                                {&reference, &from_reference}}) {
    torch::serialize::OutputArchive out;
    source->save(out);
    std::ostringstream bytes;
    out.save_to(bytes);
    torch::serialize::InputArchive in;
    std::istringstream read(bytes.str());
    in.load_from(read);
    target->load(in);
  }
  for (int step = 2; step < 5; ++step) {
    for (auto* params : {&a, &b, &a2, &b2}) set_grads(*params, step);
    fast.step();
    reference.step();
    from_fast.step();
    from_reference.step();
  }
  expect_same(a, b, "uninterrupted");
  expect_same(a2, a, "restored into LibTorch's SGD");
  expect_same(b2, b, "restored into the multi-tensor SGD");
}

TEST(MultiTensorSgd, MakeOptimizerTakesItForGpuParametersOnly) {
  // On a CPU one tensor at a time is faster (each stays in cache); the GPU
  // test MultiTensorSgdTracksLibTorchsSgdOnTheGpu checks the other side.
  OptimizerOptions o;
  o.momentum = 0.9;
  for (const OptimizerKind kind : {OptimizerKind::kSgd, OptimizerKind::kMomentum, OptimizerKind::kNesterov}) {
    o.kind = kind;
    const auto optimizer = make_optimizer(o, make_params(), RecipeOptions{});
    EXPECT_EQ(dynamic_cast<MultiTensorSgd*>(optimizer.get()), nullptr);
    EXPECT_NE(dynamic_cast<torch::optim::SGD*>(optimizer.get()), nullptr);
  }
}

}  // namespace
}  // namespace dlscale::train
