// Image classification: images [C, S, S] in, class logits out, cross-entropy
// (label smoothing, weighted auxiliary heads), top-1/top-5 accuracy,
// throughput in images. Its synthetic data is learnable: each class has a
// fixed low-resolution pattern, upsampled to the image size and added to
// unit Gaussian noise, so a model's loss falls as it trains.
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>

#include "data/sampler.h"
#include "libtorch/models/model.h"

namespace dlscale::models {

namespace {

constexpr int64_t kPatternSide = 8;  // class patterns are 8×8, upsampled
constexpr double kSignal = 1.0;      // amplitude of the class pattern relative to the noise

class ImageClassification : public Task {
 public:
  std::string name() const override { return "image-classification"; }

  std::vector<TensorSpec> inputs(const ModelSpec& spec, const ModelOptions& o) const override {
    return {{data::kImage, torch::kFloat32, {spec.channels, o.image_size, o.image_size}}};
  }

  std::vector<TensorSpec> targets(const ModelSpec&, const ModelOptions& o) const override {
    return {{data::kLabel, torch::kInt64, {}, 0, o.num_classes}};
  }

  torch::Tensor loss(const Output& out, const TensorMap& targets, const LossOptions& o) const override {
    namespace F = torch::nn::functional;
    const torch::Tensor& labels = targets.at(data::kLabel);
    const auto ce = F::CrossEntropyFuncOptions().label_smoothing(o.label_smoothing);
    torch::Tensor loss = F::cross_entropy(out.main, labels, ce);
    for (const auto& aux : out.aux) loss = loss + o.aux_weight * F::cross_entropy(aux, labels, ce);
    return loss;
  }

  std::vector<MetricSpec> metrics() const override {
    return {{"top1", "top-1", true, true}, {"top5", "top-5", true, true}};
  }

  /// Samples whose highest logit is the label, and whose label is among the
  /// five highest (all of them with fewer than five classes).
  std::vector<double> evaluate(const Output& out, const TensorMap& targets) const override {
    const torch::Tensor logits = out.main.cpu();
    const torch::Tensor labels = targets.at(data::kLabel).cpu();
    if (labels.size(0) == 0) return {0, 0};
    const int64_t k = std::min<int64_t>(5, logits.size(1));
    const torch::Tensor top = std::get<1>(logits.topk(k, 1));  // [n, k], best first
    const torch::Tensor hits = top.eq(labels.unsqueeze(1));
    return {static_cast<double>(hits.select(1, 0).sum().item<int64_t>()),
            static_cast<double>(hits.any(1).sum().item<int64_t>())};
  }

  ThroughputUnit unit(const ModelSpec&, const ModelOptions&) const override { return {"images", 1}; }

  data::SampleFn synthetic(const ModelSpec& spec, const ModelOptions& o, uint64_t seed) const override {
    // Private generators: the data does not depend on (or disturb) the global
    // RNG that initializes the model. The class patterns come from the seed,
    // each sample from (seed, its index).
    at::Generator pattern_gen = at::detail::createCPUGenerator(seed);
    const auto f32 = torch::TensorOptions().dtype(torch::kFloat32);
    const int64_t side = std::min(kPatternSide, o.image_size);
    const torch::Tensor patterns = torch::randn({o.num_classes, spec.channels, side, side}, pattern_gen, f32);
    return [patterns, seed, o, channels = spec.channels, side, f32](uint64_t index) {
      const uint64_t sample_seed = data::mix_seed(seed, index);
      const auto label = static_cast<int64_t>(sample_seed % static_cast<uint64_t>(o.num_classes));
      at::Generator gen = at::detail::createCPUGenerator(sample_seed);
      const torch::Tensor noise = torch::randn({channels, o.image_size, o.image_size}, gen, f32);
      torch::Tensor signal = patterns.narrow(0, label, 1);
      if (side != o.image_size) signal = torch::upsample_nearest2d(signal, {o.image_size, o.image_size});
      data::Sample s;
      s.inputs[data::kImage] = noise + kSignal * signal.squeeze(0);
      s.targets[data::kLabel] = torch::tensor(label, torch::kInt64);
      return s;
    };
  }
};

}  // namespace

std::shared_ptr<const Task> image_classification() {
  static const auto task = std::make_shared<const ImageClassification>();
  return task;
}

}  // namespace dlscale::models
