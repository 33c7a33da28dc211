// The Transformer of "Attention is all you need" (Vaswani et al. 2017):
// encoder and decoder stacks of post-norm layers (attention, then a ReLU
// feed-forward, each in a residual with dropout and LayerNorm), a final
// LayerNorm on each stack (as torch.nn.Transformer), one token embedding
// shared by source and target and tied to the output projection, scaled by
// sqrt(d_model), plus sinusoidal positions. The layers are written here on
// Fc (so their multiply-accumulates are counted); attention's two matrix
// products are counted by the attention module itself.
#include <cmath>
#include <limits>

#include "libtorch/models/layers.h"
#include "libtorch/models/model.h"
#include "libtorch/models/seq2seq.h"
#include "libtorch/models/zoo.h"

namespace dlscale::models {

namespace {

namespace F = torch::nn::functional;

struct Dims {
  int64_t d_model = 512;
  int64_t heads = 8;
  int64_t ff = 2048;
  int64_t layers = 6;
  double dropout = 0.1;
};

/// Multi-head attention: self-attention (one fused Q/K/V projection) or
/// attention over a memory (Q from the input, K/V from the memory); the
/// parameters are torch.nn.MultiheadAttention's, in other tensors.
class AttentionImpl : public torch::nn::Module, public MacCounter {
 public:
  AttentionImpl(const Dims& d, bool self) : d_(d) {
    if (self) {
      qkv_ = register_module("qkv", Fc(d.d_model, 3 * d.d_model));
    } else {
      q_ = register_module("q", Fc(d.d_model, d.d_model));
      kv_ = register_module("kv", Fc(d.d_model, 2 * d.d_model));
    }
    out_ = register_module("out", Fc(d.d_model, d.d_model));
  }

  /// x: [batch, Tq, d]; memory: [batch, Tk, d] (unused for self-attention);
  /// mask: added to the scores ([Tq, Tk]), or undefined.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& memory, const torch::Tensor& mask) {
    torch::Tensor q, k, v;
    if (qkv_) {
      auto parts = qkv_(x).chunk(3, -1);
      q = parts[0], k = parts[1], v = parts[2];
    } else {
      q = q_(x);
      auto parts = kv_(memory).chunk(2, -1);
      k = parts[0], v = parts[1];
    }
    const int64_t batch = x.size(0), tq = x.size(1), tk = k.size(1), dh = d_.d_model / d_.heads;
    const auto heads = [&](const torch::Tensor& t, int64_t len) {
      return t.reshape({batch, len, d_.heads, dh}).transpose(1, 2);  // [batch, heads, len, dh]
    };
    torch::Tensor scores = torch::matmul(heads(q, tq) * (1.0 / std::sqrt(static_cast<double>(dh))),
                                         heads(k, tk).transpose(-2, -1));
    if (mask.defined()) scores = scores + mask;
    const torch::Tensor weights = drop(scores.softmax(-1), d_.dropout, is_training());
    const torch::Tensor context = torch::matmul(weights, heads(v, tk)).transpose(1, 2).reshape({batch, tq, -1});
    macs_ = 2 * tq * tk * d_.d_model;  // Q·Kᵀ and weights·V
    return out_(context);
  }

  int64_t last_macs_per_sample() const override { return macs_; }
  void clear_macs() override { macs_ = 0; }

 private:
  Dims d_;
  Fc qkv_{nullptr}, q_{nullptr}, kv_{nullptr}, out_{nullptr};
  int64_t macs_ = 0;
};
TORCH_MODULE(Attention);

/// Linear(d, ff), ReLU, dropout, Linear(ff, d).
class FeedForwardImpl : public torch::nn::Module {
 public:
  explicit FeedForwardImpl(const Dims& d) : p_(d.dropout) {
    in_ = register_module("in", Fc(d.d_model, d.ff));
    out_ = register_module("out", Fc(d.ff, d.d_model));
  }
  torch::Tensor forward(const torch::Tensor& x) { return out_(drop(in_(x).relu(), p_, is_training())); }

 private:
  double p_;
  Fc in_{nullptr}, out_{nullptr};
};
TORCH_MODULE(FeedForward);

torch::nn::LayerNorm layer_norm(int64_t d) { return torch::nn::LayerNorm(torch::nn::LayerNormOptions({d})); }

class EncoderLayerImpl : public torch::nn::Module {
 public:
  explicit EncoderLayerImpl(const Dims& d) : p_(d.dropout) {
    attention_ = register_module("attention", Attention(d, true));
    ff_ = register_module("ff", FeedForward(d));
    norm1_ = register_module("norm1", layer_norm(d.d_model));
    norm2_ = register_module("norm2", layer_norm(d.d_model));
  }
  torch::Tensor forward(torch::Tensor x) {
    x = norm1_(x + drop(attention_(x, torch::Tensor(), torch::Tensor()), p_, is_training()));
    return norm2_(x + drop(ff_(x), p_, is_training()));
  }

 private:
  double p_;
  Attention attention_{nullptr};
  FeedForward ff_{nullptr};
  torch::nn::LayerNorm norm1_{nullptr}, norm2_{nullptr};
};
TORCH_MODULE(EncoderLayer);

class DecoderLayerImpl : public torch::nn::Module {
 public:
  explicit DecoderLayerImpl(const Dims& d) : p_(d.dropout) {
    self_ = register_module("self_attention", Attention(d, true));
    cross_ = register_module("cross_attention", Attention(d, false));
    ff_ = register_module("ff", FeedForward(d));
    norm1_ = register_module("norm1", layer_norm(d.d_model));
    norm2_ = register_module("norm2", layer_norm(d.d_model));
    norm3_ = register_module("norm3", layer_norm(d.d_model));
  }
  torch::Tensor forward(torch::Tensor x, const torch::Tensor& memory, const torch::Tensor& causal) {
    x = norm1_(x + drop(self_(x, torch::Tensor(), causal), p_, is_training()));
    x = norm2_(x + drop(cross_(x, memory, torch::Tensor()), p_, is_training()));
    return norm3_(x + drop(ff_(x), p_, is_training()));
  }

 private:
  double p_;
  Attention self_{nullptr}, cross_{nullptr};
  FeedForward ff_{nullptr};
  torch::nn::LayerNorm norm1_{nullptr}, norm2_{nullptr}, norm3_{nullptr};
};
TORCH_MODULE(DecoderLayer);

/// The output projection, tied to the embedding: logits = h · Eᵀ. It holds
/// no parameter; it counts its multiply-accumulates.
class TiedProjectionImpl : public torch::nn::Module, public MacCounter {
 public:
  torch::Tensor forward(const torch::Tensor& h, const torch::Tensor& embedding) {
    macs_ = h.size(1) * embedding.numel();  // per sample: length × vocab × d
    return F::linear(h, embedding);
  }
  int64_t last_macs_per_sample() const override { return macs_; }
  void clear_macs() override { macs_ = 0; }

 private:
  int64_t macs_ = 0;
};
TORCH_MODULE(TiedProjection);

/// Sinusoidal positions [length, d]: sin on even features, cos on odd ones.
torch::Tensor sinusoids(int64_t length, int64_t d, const torch::TensorOptions& options) {
  const torch::Tensor pos = torch::arange(length, torch::kFloat64).unsqueeze(1);
  const torch::Tensor rates = torch::exp(torch::arange(0, d, 2, torch::kFloat64) * (-std::log(10000.0) / d));
  torch::Tensor pe = torch::zeros({length, d}, torch::kFloat64);
  pe.index_put_({torch::indexing::Slice(), torch::indexing::Slice(0, torch::indexing::None, 2)},
                torch::sin(pos * rates));
  pe.index_put_({torch::indexing::Slice(), torch::indexing::Slice(1, torch::indexing::None, 2)},
                torch::cos(pos * rates).narrow(1, 0, d / 2));
  return pe.to(options);
}

class Transformer : public Model {
 public:
  Transformer(const Dims& d, int64_t vocab) : d_(d) {
    embedding_ = register_module("embedding", torch::nn::Embedding(vocab, d.d_model));
    for (int64_t i = 0; i < d.layers; ++i) {
      encoder_.push_back(register_module("encoder" + std::to_string(i), EncoderLayer(d)));
      declare_unit(encoder_.back().ptr());
    }
    encoder_norm_ = register_module("encoder_norm", layer_norm(d.d_model));
    for (int64_t i = 0; i < d.layers; ++i) {
      decoder_.push_back(register_module("decoder" + std::to_string(i), DecoderLayer(d)));
      declare_unit(decoder_.back().ptr());
    }
    decoder_norm_ = register_module("decoder_norm", layer_norm(d.d_model));
    projection_ = register_module("projection", TiedProjection());
    torch::NoGradGuard no_grad;
    for (auto& p : parameters()) {
      if (p.dim() > 1) torch::nn::init::xavier_uniform_(p);  // as torch.nn.Transformer
    }
    embedding_->weight.normal_(0.0, 1.0 / std::sqrt(static_cast<double>(d.d_model)));  // tied: fairseq's scale
  }

  Output forward(const TensorMap& inputs) override {
    const torch::Tensor& tgt = inputs.at(kTargetIn);
    torch::Tensor memory = embed(inputs.at(kSourceTokens));
    // Each layer is a unit; the shared embedding and the norms are not.
    size_t unit = 0;
    for (auto& layer : encoder_) memory = run_unit(unit++, [&] { return layer(memory); });
    memory = encoder_norm_(memory);
    const int64_t t = tgt.size(1);
    const torch::Tensor causal =
        torch::full({t, t}, -std::numeric_limits<float>::infinity(), memory.options()).triu(1);
    torch::Tensor h = embed(tgt);
    for (auto& layer : decoder_) h = run_unit(unit++, [&] { return layer(h, memory, causal); });
    return {projection_(decoder_norm_(h), embedding_->weight), {}};
  }

 private:
  torch::Tensor embed(const torch::Tensor& tokens) {
    const torch::Tensor x = embedding_(tokens) * std::sqrt(static_cast<double>(d_.d_model));
    const int64_t len = tokens.size(1);
    if (!positions_.defined() || positions_.size(0) < len || positions_.device() != x.device() ||
        positions_.scalar_type() != x.scalar_type()) {
      positions_ = sinusoids(len, d_.d_model, x.options());
    }
    return drop(x + positions_.narrow(0, 0, len), d_.dropout, is_training());
  }

  Dims d_;
  torch::nn::Embedding embedding_{nullptr};
  std::vector<EncoderLayer> encoder_;
  std::vector<DecoderLayer> decoder_;
  torch::nn::LayerNorm encoder_norm_{nullptr}, decoder_norm_{nullptr};
  TiedProjection projection_{nullptr};
  torch::Tensor positions_;  // sinusoids, cached per length, device and dtype
};

ModelSpec transformer_spec(const std::string& name, const std::string& description, const Dims& dims) {
  ModelSpec s =
      non_image_spec(name, description, translation(), "transformer",
                     {"--vocab", "--seq-len", "--min-seq-len", "--ambiguity", "--hidden"});
  s.default_vocab = 32768;
  s.default_seq_len = 128;
  s.default_label_smoothing = 0.1;
  s.default_hidden = dims.d_model;
  s.make = [dims](const ModelOptions& o) {
    Dims d = dims;
    d.dropout = dropout_or(o, dims.dropout);
    if (o.hidden != dims.d_model) {  // --hidden: d_model, a feed-forward of 4x, heads of 64 features
      d.d_model = o.hidden;
      d.ff = 4 * o.hidden;
      d.heads = o.hidden % 64 == 0 ? o.hidden / 64 : 1;
    }
    return std::make_shared<Transformer>(d, o.vocab);
  };
  return s;
}

}  // namespace

std::vector<ModelSpec> transformer_specs() {
  return {transformer_spec("transformer",
                           "Transformer base (Vaswani et al. 2017): 6+6 layers, d 512, 8 heads, ff 2048, tied "
                           "embedding",
                           Dims{512, 8, 2048, 6, 0.1}),
          transformer_spec("transformer-big", "Transformer big: 6+6 layers, d 1024, 16 heads, ff 4096, tied embedding",
                           Dims{1024, 16, 4096, 6, 0.3})};
}

}  // namespace dlscale::models
