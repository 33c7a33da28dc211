#pragma once
// The model zoo: a registry of named architectures with their task (what
// they read and learn, libtorch/models/task.h), default input, parameter count and
// forward FLOPs per sample (computed, not tabulated).
#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "models/model_options.h"
#include "libtorch/models/op_count.h"
#include "libtorch/models/task.h"
#include "libtorch/models/units.h"

namespace dlscale::models {

/// Base class of every model: a forward pass over the named inputs its task
/// declares.
class Model : public torch::nn::Module {
 public:
  virtual Output forward(const TensorMap& inputs) = 0;
  /// The submodules a sharded strategy may gather one at a time, in forward
  /// order (libtorch/models/units.h); empty when the model declares none.
  const std::vector<std::shared_ptr<torch::nn::Module>>& units() const { return units_; }
  /// Tells `observer` (null: nobody) about each unit's forward.
  void set_unit_observer(UnitObserver* observer) { observer_ = observer; }
  /// The MACs of a forward pass over `probe` when the model counts them
  /// itself (a TorchScript module, by its operators: libtorch/models/op_count.h);
  /// nullopt: its MacCounter layers count them.
  virtual std::optional<OpCount> own_macs(const TensorMap& probe) {
    (void)probe;
    return std::nullopt;
  }
  /// Lays out the parameters for --memory-format: channels-last makes every
  /// 4-D (convolution) weight so; a model with other needs overrides it.
  virtual void use_memory_format(bool channels_last);

 protected:
  /// Declares `module` (registered already) the next unit in forward order.
  void declare_unit(std::shared_ptr<torch::nn::Module> module) { units_.push_back(std::move(module)); }
  /// Unit `unit`'s forward, `run()`, between the observer's calls.
  template <typename Run>
  torch::Tensor run_unit(size_t unit, Run&& run) {
    if (observer_ == nullptr) return run();
    observer_->before_unit(unit);
    torch::Tensor out = run();
    observer_->after_unit(unit, out);
    return out;
  }

 private:
  std::vector<std::shared_ptr<torch::nn::Module>> units_;
  UnitObserver* observer_ = nullptr;
};

/// Each of `model`'s units as indices into model.parameters(), in forward
/// order. A parameter that two units share belongs to neither (the strategy
/// keeps it with the rest of the model), so a unit may have none.
std::vector<std::vector<size_t>> unit_parameters(const Model& model);

/// Indices into model.parameters() of the embedding tables built with sparse
/// gradients (--sparse-embeddings), in order.
std::vector<size_t> sparse_gradient_parameters(const Model& model);

/// A model of images: reads the "image" input, [batch, channels, height, width].
class ImageModel : public Model {
 public:
  Output forward(const TensorMap& inputs) override { return forward_image(inputs.at(data::kImage)); }
  virtual Output forward_image(const torch::Tensor& x) = 0;
};

/// The dropout probability to use where the architecture has `model_default`.
inline double dropout_or(const ModelOptions& o, double model_default) {
  return o.dropout >= 0 ? o.dropout : model_default;
}

/// What the registry knows about one architecture.
struct ModelSpec {
  std::string name;
  std::string description;
  std::shared_ptr<const Task> task;  ///< what it reads and learns (register_model requires one)
  std::string family;  ///< for listings: cnn, transformer, rnn, recommendation, detection
  /// The model flags it takes besides --model and --dropout; setting another
  /// is an error naming the family and these.
  std::vector<std::string> takes;
  bool takes_flag(const std::string& flag) const;
  int64_t default_vocab = 0;        ///< sequence models
  int64_t default_seq_len = 0;
  int64_t default_hidden = 0;       ///< recurrent models (--hidden)
  int64_t channels = 0;             ///< input channels (models that read images)
  int64_t default_image_size = 0;
  int64_t min_image_size = 1;       ///< smallest height = width the architecture accepts
  int64_t min_image_size_aux = 0;   ///< the same with auxiliary classifiers (0: has none)
  int64_t default_classes = 0;
  int64_t default_rois = 0;            ///< RoIs sampled per image (two-stage detectors, --rois)
  int64_t default_backbone_batch = 0;  ///< images a backbone pass takes (--backbone-batch)
  int64_t min_classes = 1;          ///< a detector needs the background and a class
  bool fixed_classes = false;  ///< its classes are default_classes (a TorchScript module's output)
  bool fixed_vocab = false;    ///< its vocabulary is default_vocab (a TorchScript module's output)
  /// The first training batch is checked against the task's tensors (dtype,
  /// sizes) before the model reads it: a TorchScript module's task states
  /// its own shapes, which real data must have; the zoo's data is made to fit.
  bool checks_batches = false;
  /// A TorchScript model's files, "BYTES:FNV1A" of the module and of its
  /// task file: ranks must agree on them, records carry them ("" for the zoo).
  std::string file_digest;
  double aux_loss_weight = 0.0;     ///< weight of each auxiliary loss (torchvision recipes)
  double default_label_smoothing = 0.0;  ///< when --label-smoothing is negative
  std::function<std::shared_ptr<Model>(const ModelOptions&)> make;  ///< resolved options
};

/// A spec of an image classifier: image classification's task, family
/// "cnn", flags --image-size and --classes, 3 channels, 224 pixels and 1000
/// classes by default (ImageNet's); the zoo's CNNs start from it. A spec
/// says nothing of images unless it starts here or sets them itself.
ModelSpec image_classifier_spec(std::string name, std::string description);

/// A spec of a model that reads no image (no channels, image size or
/// classes): the families beyond image classification start from it.
ModelSpec non_image_spec(std::string name, std::string description, std::shared_ptr<const Task> task,
                         std::string family, std::vector<std::string> takes);

/// All registered models, in listing order.
const std::vector<ModelSpec>& model_specs();

/// Adds `spec` to the registry (after the zoo), so that `--model NAME` and
/// `dlscale models` know it; a model of a new family or task is one file
/// that calls this (at start-up or from a test). Throws dlscale::Error when
/// the name is taken or the spec has no task or factory.
void register_model(ModelSpec spec);

/// The spec named `name`; throws dlscale::Error listing the known names.
const ModelSpec& find_model(const std::string& name);

/// The spec of the model `options` names: a zoo name (find_model), or a
/// TorchScript file, PATH.pt or script:PATH, with its --task-file
/// (libtorch/models/script_model.h). Throws dlscale::Error as those do.
const ModelSpec& model_spec(const ModelOptions& options);

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
/// probe sample (task.h's probe_inputs) through the model and walking its
/// layers. Forward FLOPs per sample are 2 × this (docs/metrics.md).
/// Restores the training mode.
int64_t count_macs_per_sample(Model& model, const TensorMap& probe);

/// The layers of `model` that hold weights and do work the FLOP count misses:
/// plain torch::nn Linear, Conv, ConvTranspose, LSTM, GRU, RNN, Bilinear or
/// MultiheadAttention modules outside a MacCounter (libtorch/models/layers.h's Fc and
/// Conv count themselves). Their paths, e.g. "head.fc1 (Linear)".
std::vector<std::string> uncounted_layers(Model& model);

/// Summary of a built model at given options, for listings and records.
struct ModelFacts {
  std::string name;
  int64_t channels = 0;
  int64_t image_size = 0;
  int64_t num_classes = 0;
  int64_t parameters = 0;
  int64_t macs_per_sample = 0;
  std::vector<std::string> uncounted_layers;  ///< uncounted_layers(): its FLOPs are too low
  int64_t vocab = 0;               ///< sequence models
  int64_t seq_len = 0;
  int64_t hidden = 0;              ///< recurrent models (--hidden)
  std::string family;
  std::string task;                ///< its task's name
  std::string file_digest;         ///< ModelSpec::file_digest
  ThroughputUnit unit;             ///< what its throughput counts
  std::vector<TensorSpec> inputs;  ///< what it reads, per sample
  double flops_per_sample() const { return 2.0 * static_cast<double>(macs_per_sample); }
};

/// Measures the facts of `model`, built from `spec` with resolved `options`.
ModelFacts measure_model(const ModelSpec& spec, const ModelOptions& options, Model& model);

/// Builds the model (with resolved options) and measures its facts.
ModelFacts describe_model(const ModelSpec& spec, const ModelOptions& options);

}  // namespace dlscale::models
