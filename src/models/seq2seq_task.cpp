// Sequence to sequence ("translation"): source tokens and the target shifted
// right by one (a begin-of-sequence token first) in, logits over the
// vocabulary for every target position out; label-smoothed cross-entropy,
// token accuracy, throughput in target tokens.
//
// The synthetic task is learnable and deterministic: a fixed permutation of
// the vocabulary (drawn from the seed) maps each source token, and the
// target is the mapped source reversed, so a model must learn both a
// per-token dictionary and to attend across the sequence.
#include <ATen/CPUGeneratorImpl.h>

#include "data/sampler.h"
#include "models/model.h"
#include "models/seq2seq.h"

namespace dlscale::models {

namespace {

class Translation : public Task {
 public:
  std::string name() const override { return "translation"; }

  std::vector<TensorSpec> inputs(const ModelSpec&, const ModelOptions& o) const override {
    return {{kSourceTokens, torch::kInt64, {o.seq_len}, kFirstWord, o.vocab},
            {kTargetIn, torch::kInt64, {o.seq_len}, kBeginToken, o.vocab}};
  }

  std::vector<TensorSpec> targets(const ModelSpec&, const ModelOptions& o) const override {
    return {{kTargetTokens, torch::kInt64, {o.seq_len}, kFirstWord, o.vocab}};
  }

  torch::Tensor loss(const Output& out, const TensorMap& targets, const LossOptions& o) const override {
    namespace F = torch::nn::functional;
    const torch::Tensor& logits = out.main;  // [batch, length, vocab]
    return F::cross_entropy(logits.reshape({-1, logits.size(-1)}), targets.at(kTargetTokens).reshape({-1}),
                            F::CrossEntropyFuncOptions().label_smoothing(o.label_smoothing));
  }

  std::vector<MetricSpec> metrics() const override { return {{"token_acc", "token accuracy", true, true}}; }

  /// Each sample's fraction of target tokens whose highest logit is right.
  std::vector<double> evaluate(const Output& out, const TensorMap& targets) const override {
    const torch::Tensor tgt = targets.at(kTargetTokens).cpu();
    if (tgt.size(0) == 0) return {0};
    const torch::Tensor right = out.main.argmax(-1).cpu().eq(tgt).to(torch::kFloat64);
    return {right.mean(1).sum().item<double>()};
  }

  ThroughputUnit unit(const ModelSpec&, const ModelOptions& o) const override { return {"tokens", o.seq_len}; }

  data::SampleFn synthetic(const ModelSpec&, const ModelOptions& o, uint64_t seed) const override {
    at::Generator dict_gen = at::detail::createCPUGenerator(seed);
    const int64_t words = o.vocab - kFirstWord;
    const torch::Tensor dictionary = torch::randperm(words, dict_gen, torch::kInt64) + kFirstWord;
    return [dictionary, seed, o](uint64_t index) {
      at::Generator gen = at::detail::createCPUGenerator(data::mix_seed(seed, index));
      const torch::Tensor src = torch::randint(kFirstWord, o.vocab, {o.seq_len}, gen, torch::kInt64);
      const torch::Tensor tgt = dictionary.index_select(0, src - kFirstWord).flip(0);
      data::Sample s;
      s.inputs[kSourceTokens] = src;
      s.inputs[kTargetIn] = shift_right(tgt);
      s.targets[kTargetTokens] = tgt;
      return s;
    };
  }
};

}  // namespace

torch::Tensor shift_right(const torch::Tensor& tgt) {
  torch::Tensor in = torch::empty_like(tgt);
  in.narrow(-1, 0, 1).fill_(kBeginToken);
  const int64_t n = tgt.size(-1);
  if (n > 1) in.narrow(-1, 1, n - 1).copy_(tgt.narrow(-1, 0, n - 1));
  return in;
}

std::shared_ptr<const Task> translation() {
  static const auto task = std::make_shared<const Translation>();
  return task;
}

}  // namespace dlscale::models
