// Sequence to sequence ("translation"): source tokens and the target shifted
// right by one (a begin-of-sequence token first) in, logits over the
// vocabulary for every target position out; label-smoothed cross-entropy,
// token accuracy, throughput in target tokens.
//
// The synthetic task is learnable and deterministic: a fixed permutation of
// the vocabulary (drawn from the seed) maps each source token, and the
// target is the mapped source reversed, so a model must learn both a
// per-token dictionary and to attend across the sequence.
//
// With --ambiguity P, a second permutation gives each word a second
// translation, and each target word is, with probability P (drawn from the
// sample's own seed), that one instead: a real text's choice between
// synonyms. No model can then beat a token accuracy of 1 - P on held-out
// samples, and the loss keeps a floor whose gradient noise never vanishes,
// as real language's entropy keeps it (docs/convergence.md).
//
// With --min-seq-len below --seq-len, each global batch of the training
// stream has a length of its own, drawn from (seed, batch) uniformly in
// [min, max], as length-bucketed batches of real text have; every sequence of
// a batch has it (no padding), and throughput counts the tokens the batches
// held. Held-out samples have the full length.
#include <ATen/CPUGeneratorImpl.h>

#include "core/error.h"
#include "data/sampler.h"
#include "libtorch/models/model.h"
#include "libtorch/models/seq2seq.h"

namespace dlscale::models {

namespace {

class Translation : public Task {
 public:
  std::string name() const override { return "translation"; }

  std::vector<TensorSpec> inputs(const ModelSpec&, const ModelOptions& o) const override {
    return {{kSourceTokens, torch::kInt64, {o.seq_len}, kFirstWord, o.vocab, varies(o)},
            {kTargetIn, torch::kInt64, {o.seq_len}, kBeginToken, o.vocab, varies(o)}};
  }

  std::vector<TensorSpec> targets(const ModelSpec&, const ModelOptions& o) const override {
    return {{kTargetTokens, torch::kInt64, {o.seq_len}, kFirstWord, o.vocab, varies(o)}};
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

  /// The most tokens a sample holds (--seq-len); a batch's may be fewer.
  ThroughputUnit unit(const ModelSpec&, const ModelOptions& o) const override { return {"tokens", o.seq_len}; }

  std::optional<int64_t> items_in(const TensorMap& targets) const override {
    return targets.at(kTargetTokens).numel();
  }

  data::SampleFn synthetic(const ModelSpec&, const ModelOptions& o, uint64_t seed) const override {
    return [dictionary = dictionary_of(o, seed), seed, o](uint64_t index) {
      return sample_at(dictionary, seed, o, index, o.seq_len);
    };
  }

  data::SampleFn synthetic_stream(const ModelSpec& spec, const ModelOptions& o, uint64_t seed,
                                  int64_t global_batch) const override {
    if (o.min_seq_len <= 0 || o.min_seq_len >= o.seq_len) return synthetic(spec, o, seed);
    DLSCALE_ASSERT(global_batch >= 1);
    return [dictionary = dictionary_of(o, seed), seed, o, global_batch](uint64_t index) {
      const uint64_t batch = index / static_cast<uint64_t>(global_batch);
      const auto span = static_cast<uint64_t>(o.seq_len - o.min_seq_len + 1);
      const int64_t length =
          o.min_seq_len + static_cast<int64_t>(data::mix_seed(seed ^ kLengthStream, batch) % span);
      return sample_at(dictionary, seed, o, index, length);
    };
  }

 private:
  /// With --min-seq-len below --seq-len, a batch's length is its own.
  static bool varies(const ModelOptions& o) {
    return o.min_seq_len > 0 && o.min_seq_len < o.seq_len;
  }

  static constexpr uint64_t kLengthStream = 0x6c656e67746873ULL;  // "lengths": the batches' lengths

  /// The words' translations from the seed: row 0 a permutation of the
  /// words, and with --ambiguity row 1 another one, each word's second
  /// translation (never its first).
  static torch::Tensor dictionary_of(const ModelOptions& o, uint64_t seed) {
    at::Generator dict_gen = at::detail::createCPUGenerator(seed);
    const int64_t words = o.vocab - kFirstWord;
    const torch::Tensor first = torch::randperm(words, dict_gen, torch::kInt64);
    if (o.ambiguity <= 0) return (first + kFirstWord).unsqueeze(0);
    // A shift by 1..words-1 within the permutation moves every word elsewhere.
    const int64_t shift =
        words > 1 ? 1 + torch::randint(words - 1, {1}, dict_gen).item<int64_t>() : 0;
    return torch::stack({first, first.roll(shift)}) + kFirstWord;
  }

  /// Sample `index` at `length` tokens: source words from (seed, index), the
  /// target their translation reversed, each word's second one with
  /// probability --ambiguity.
  static data::Sample sample_at(const torch::Tensor& dictionary, uint64_t seed,
                                const ModelOptions& o, uint64_t index, int64_t length) {
    at::Generator gen = at::detail::createCPUGenerator(data::mix_seed(seed, index));
    const torch::Tensor src = torch::randint(kFirstWord, o.vocab, {length}, gen, torch::kInt64);
    const torch::Tensor words = src - kFirstWord;
    torch::Tensor tgt = dictionary[0].index_select(0, words);
    if (o.ambiguity > 0) {
      const torch::Tensor second = torch::rand({length}, gen, torch::kFloat64).lt(o.ambiguity);
      tgt = torch::where(second, dictionary[1].index_select(0, words), tgt);
    }
    tgt = tgt.flip(0);
    data::Sample s;
    s.inputs[kSourceTokens] = src;
    s.inputs[kTargetIn] = shift_right(tgt);
    s.targets[kTargetTokens] = tgt;
    return s;
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
