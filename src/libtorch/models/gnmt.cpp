// GNMT as in MLPerf's training reference (rnn_translator, "gnmt"; Wu et al.
// 2016): a 4-layer LSTM encoder whose first layer is bidirectional, a
// 4-layer LSTM decoder whose first layer feeds normalized Bahdanau attention
// over the encoder's outputs, the attention's context concatenated to every
// later layer's input, residual connections from the third layer of each
// stack on, dropout between layers, one token embedding shared by source and
// target, and a linear classifier over the vocabulary. Teacher forcing: the
// attention of every target position is computed at once from the first
// decoder layer's outputs, as the reference does. The LSTMs count their
// multiply-accumulates (4·H·(in + H) per token and direction), the attention
// its score and context products, Fc the rest.
#include <cmath>

#include "libtorch/models/layers.h"
#include "libtorch/models/model.h"
#include "libtorch/models/seq2seq.h"
#include "libtorch/models/zoo.h"

namespace dlscale::models {

namespace {

namespace F = torch::nn::functional;

/// torch::nn::LSTM (batch first, zero initial state) that counts its
/// multiply-accumulates.
class LstmImpl : public torch::nn::Module, public MacCounter {
 public:
  LstmImpl(int64_t in, int64_t hidden, bool bidirectional)
      : in_(in), hidden_(hidden), directions_(bidirectional ? 2 : 1) {
    lstm_ = register_module(
        "lstm", torch::nn::LSTM(torch::nn::LSTMOptions(in, hidden).batch_first(true).bidirectional(bidirectional)));
  }
  /// [batch, length, in] -> [batch, length, directions·hidden].
  torch::Tensor forward(const torch::Tensor& x) {
    macs_ = x.size(1) * directions_ * 4 * hidden_ * (in_ + hidden_);
    return std::get<0>(lstm_->forward(x));
  }
  int64_t last_macs_per_sample() const override { return macs_; }
  void clear_macs() override { macs_ = 0; }

 private:
  int64_t in_, hidden_, directions_;
  torch::nn::LSTM lstm_{nullptr};
  int64_t macs_ = 0;
};
TORCH_MODULE(Lstm);

/// Normalized Bahdanau attention (the reference's BahdanauAttention with
/// normalize=True): score(q, k) = v̂ · tanh(W_q q + W_k k + b), where
/// v̂ = g · v / |v|; the context is the softmax-weighted sum of the keys.
class BahdanauAttentionImpl : public torch::nn::Module, public MacCounter {
 public:
  explicit BahdanauAttentionImpl(int64_t units) : units_(units) {
    query_ = register_module("query", Fc(torch::nn::LinearOptions(units, units).bias(false)));
    key_ = register_module("key", Fc(torch::nn::LinearOptions(units, units).bias(false)));
    v_ = register_parameter("v", torch::empty({units}).uniform_(-0.1, 0.1));
    gain_ = register_parameter("gain", torch::full({1}, 1.0 / std::sqrt(static_cast<double>(units))));
    bias_ = register_parameter("bias", torch::zeros({units}));
  }
  /// query [batch, Tq, units], keys [batch, Tk, units] -> context [batch, Tq, units].
  torch::Tensor forward(const torch::Tensor& query, const torch::Tensor& keys) {
    const torch::Tensor sum = query_(query).unsqueeze(2) + key_(keys).unsqueeze(1);  // [batch, Tq, Tk, units]
    const torch::Tensor scores = torch::tanh(sum + bias_).matmul(v_ / v_.norm() * gain_);  // [batch, Tq, Tk]
    macs_ = 2 * query.size(1) * keys.size(1) * units_;  // the scores' dot products and the weighted sum
    return torch::bmm(scores.softmax(-1), keys);
  }
  int64_t last_macs_per_sample() const override { return macs_; }
  void clear_macs() override { macs_ = 0; }

 private:
  int64_t units_;
  Fc query_{nullptr}, key_{nullptr};
  torch::Tensor v_, gain_, bias_;
  int64_t macs_ = 0;
};
TORCH_MODULE(BahdanauAttention);

class Gnmt : public Model {
 public:
  Gnmt(int64_t vocab, int64_t h, double dropout) : p_(dropout) {
    embedding_ = register_module("embedding", torch::nn::Embedding(vocab, h));
    encoder_.push_back(register_module("encoder0", Lstm(h, h, true)));
    encoder_.push_back(register_module("encoder1", Lstm(2 * h, h, false)));
    encoder_.push_back(register_module("encoder2", Lstm(h, h, false)));
    encoder_.push_back(register_module("encoder3", Lstm(h, h, false)));
    attention_rnn_ = register_module("decoder0", Lstm(h, h, false));
    attention_ = register_module("attention", BahdanauAttention(h));
    for (int i = 1; i <= 3; ++i) decoder_.push_back(register_module("decoder" + std::to_string(i), Lstm(2 * h, h, false)));
    classifier_ = register_module("classifier", Fc(h, vocab));
    torch::NoGradGuard no_grad;
    // The reference's init_weight 0.1: uniform ±0.1, the LSTMs' hidden biases 0.
    for (auto& item : named_parameters()) {
      const std::string& name = item.key();
      if (name.find("attention.") == 0) continue;  // its own (above) and LibTorch's Linear default
      if (name.find("bias_hh") != std::string::npos) {
        item.value().zero_();
      } else {
        item.value().uniform_(-0.1, 0.1);
      }
    }
  }

  Output forward(const TensorMap& inputs) override {
    const bool t = is_training();
    torch::Tensor x = encoder_[0](drop(embedding_(inputs.at(kSourceTokens)), p_, t));
    x = encoder_[1](drop(x, p_, t));
    for (size_t i = 2; i < encoder_.size(); ++i) x = x + encoder_[i](drop(x, p_, t));  // residual from layer 3
    const torch::Tensor context = x;
    const torch::Tensor y = attention_rnn_(drop(embedding_(inputs.at(kTargetIn)), p_, t));
    const torch::Tensor attended = attention_(y, context);
    x = decoder_[0](drop(torch::cat({y, attended}, -1), p_, t));
    for (size_t i = 1; i < decoder_.size(); ++i) x = x + decoder_[i](drop(torch::cat({x, attended}, -1), p_, t));
    return {classifier_(x), {}};
  }

 private:
  double p_;
  torch::nn::Embedding embedding_{nullptr};
  std::vector<Lstm> encoder_;
  Lstm attention_rnn_{nullptr};
  BahdanauAttention attention_{nullptr};
  std::vector<Lstm> decoder_;
  Fc classifier_{nullptr};
};

}  // namespace

ModelSpec gnmt_spec() {
  ModelSpec s = non_image_spec(
      "gnmt",
      "GNMT (MLPerf): 4+4 LSTM layers, hidden 1024, bidirectional first encoder layer, "
      "normalized Bahdanau attention, residuals from layer 3",
      translation(), "rnn", {"--vocab", "--seq-len", "--min-seq-len", "--ambiguity", "--hidden"});
  s.default_vocab = 32320;
  s.default_seq_len = 50;  // MLPerf's longest training sentence
  s.default_hidden = 1024;
  s.default_label_smoothing = 0.1;
  s.make = [](const ModelOptions& o) { return std::make_shared<Gnmt>(o.vocab, o.hidden, dropout_or(o, 0.2)); };
  return s;
}

}  // namespace dlscale::models
