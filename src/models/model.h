#pragma once
// The model zoo: a registry of named architectures with their default input,
// parameter count and forward FLOPs per sample (computed, not tabulated).
#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "models/model_options.h"

namespace dlscale::models {

/// Output of a forward pass: the main logits [batch, classes] and, in training
/// mode for models built with auxiliary classifiers, their logits too.
struct Logits {
  torch::Tensor main;
  std::vector<torch::Tensor> aux;
};

/// Base class of every zoo model.
class Model : public torch::nn::Module {
 public:
  /// `x` is [batch, channels, height, width].
  virtual Logits forward(const torch::Tensor& x) = 0;
};

/// The dropout probability to use where the architecture has `model_default`.
inline double dropout_or(const ModelOptions& o, double model_default) {
  return o.dropout >= 0 ? o.dropout : model_default;
}

/// What the registry knows about one architecture.
struct ModelSpec {
  std::string name;
  std::string description;
  int64_t channels = 3;             ///< input channels
  int64_t default_image_size = 224;
  int64_t min_image_size = 1;       ///< smallest height = width the architecture accepts
  int64_t min_image_size_aux = 0;   ///< the same with auxiliary classifiers (0: has none)
  int64_t default_classes = 1000;
  double aux_loss_weight = 0.0;     ///< weight of each auxiliary loss (torchvision recipes)
  std::function<std::shared_ptr<Model>(const ModelOptions&)> make;  ///< resolved options
};

/// All registered models, in listing order.
const std::vector<ModelSpec>& model_specs();

/// The spec named `name`; throws dlscale::Error listing the known names.
const ModelSpec& find_model(const std::string& name);

/// Fills defaults (0 fields) from the spec and validates: classes >= 1,
/// image size >= the model's minimum, aux only where the model has it.
/// Throws dlscale::Error naming the bad value and what is allowed.
ModelOptions resolve_options(const ModelSpec& spec, ModelOptions options);

/// Builds the model with resolved options (see resolve_options).
std::shared_ptr<Model> make_model(const ModelSpec& spec, const ModelOptions& options);

/// Number of trainable parameters (sum of numel over parameters()).
int64_t count_parameters(torch::nn::Module& model);

/// Multiply-accumulates of one forward pass per sample in inference mode,
/// counted over every convolution and fully connected layer by running one
/// probe sample through the model and walking its layers. Forward FLOPs per
/// sample are 2 × this (docs/metrics.md). Restores the training mode.
int64_t count_macs_per_sample(Model& model, int64_t channels, int64_t image_size);

/// Summary of a built model at given options, for listings and records.
struct ModelFacts {
  std::string name;
  int64_t channels = 0;
  int64_t image_size = 0;
  int64_t num_classes = 0;
  int64_t parameters = 0;
  int64_t macs_per_sample = 0;
  double flops_per_sample() const { return 2.0 * static_cast<double>(macs_per_sample); }
};

/// Measures the facts of `model`, built from `spec` with resolved `options`.
ModelFacts measure_model(const ModelSpec& spec, const ModelOptions& options, Model& model);

/// Builds the model (with resolved options) and measures its facts.
ModelFacts describe_model(const ModelSpec& spec, const ModelOptions& options);

}  // namespace dlscale::models
