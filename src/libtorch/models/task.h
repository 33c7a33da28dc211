#pragma once
// The task seam: what a model learns to do. A model's spec names its task;
// the task says what the model reads (named input tensors), what its loss
// compares the outputs with (named targets), which quality metrics it can
// evaluate, what throughput counts (images, tokens, samples) and how to make
// synthetic samples. The trainer, the strategies, the evaluator and the
// reports go through it and name no task; image classification
// (image_task.cpp) is the first.
#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/metric_spec.h"
#include "libtorch/data/data_source.h"
#include "models/model_options.h"

namespace dlscale::data {
struct DatasetInfo;
struct SourceOptions;
}  // namespace dlscale::data

namespace dlscale::models {

using data::TensorMap;
struct ModelSpec;

/// One named tensor of a sample (its batch dimension left out).
struct TensorSpec {
  std::string name;
  torch::ScalarType dtype = torch::kFloat32;
  std::vector<int64_t> shape;  ///< after the batch dimension
  int64_t low = 0;             ///< integer IDs: values in [low, high)
  int64_t high = 0;
  bool varies = false;         ///< its shape may change from batch to batch (e.g. sequence length)
};

/// Output of a forward pass: the main output and, in training mode for
/// models built with auxiliary heads, theirs too.
struct Output {
  torch::Tensor main;
  std::vector<torch::Tensor> aux;
};

/// What throughput counts: `name` per second, `items_per_sample` per sample.
struct ThroughputUnit {
  std::string name = "samples";
  int64_t items_per_sample = 1;
};

/// Settings of the loss that come from the run and the model's spec.
struct LossOptions {
  double label_smoothing = 0;  ///< --label-smoothing (classification)
  double aux_weight = 0;       ///< weight of each auxiliary output's loss
};

class Task {
 public:
  virtual ~Task() = default;
  /// Short name for records, e.g. "image-classification".
  virtual std::string name() const = 0;
  /// The model's inputs and the batch's targets for `spec` at resolved options.
  virtual std::vector<TensorSpec> inputs(const ModelSpec& spec, const ModelOptions& options) const = 0;
  virtual std::vector<TensorSpec> targets(const ModelSpec& spec, const ModelOptions& options) const = 0;
  /// The training loss of `output` against the batch's `targets`.
  virtual torch::Tensor loss(const Output& output, const TensorMap& targets,
                             const LossOptions& options) const = 0;
  /// The quality metrics evaluate() sums, in its order; the first is the one
  /// a target (--target-accuracy) is set on. Empty: the task has none.
  virtual std::vector<MetricSpec> metrics() const = 0;
  /// Per-metric sums over a batch (a metric's value is its sum over the test
  /// set divided by the samples), so ranks' parts add up exactly.
  virtual std::vector<double> evaluate(const Output& output, const TensorMap& targets) const = 0;
  virtual ThroughputUnit unit(const ModelSpec& spec, const ModelOptions& options) const = 0;
  /// Synthetic sample i, from `seed` and i alone. The default draws every
  /// float tensor from a unit Gaussian and every integer one uniformly from
  /// [low, high); a task overrides it to make its data learnable.
  virtual data::SampleFn synthetic(const ModelSpec& spec, const ModelOptions& options, uint64_t seed) const;
  /// Synthetic training sample i of a stream whose global batches hold
  /// `global_batch` samples (sample i is in batch i / global_batch): by
  /// default synthetic()'s. A task whose samples take a shape per batch
  /// (translation's lengths with --min-seq-len) overrides it; held-out
  /// samples stay synthetic()'s.
  virtual data::SampleFn synthetic_stream(const ModelSpec& spec, const ModelOptions& options,
                                          uint64_t seed, int64_t global_batch) const {
    (void)global_batch;
    return synthetic(spec, options, seed);
  }
  /// The items (throughput's unit) a batch with `targets` holds, when they
  /// vary from batch to batch (translation's target tokens); nullopt: each
  /// sample holds unit().items_per_sample.
  virtual std::optional<int64_t> items_in(const TensorMap& targets) const {
    (void)targets;
    return std::nullopt;
  }
  /// Held-out synthetic sample j (docs/models.md): by default synthetic()'s
  /// sample kSyntheticTestIndex + j, which no training sample is; a task
  /// whose evaluation reads other inputs (recommendation's candidate lists)
  /// overrides it.
  virtual data::SampleFn synthetic_test(const ModelSpec& spec, const ModelOptions& options, uint64_t seed) const;

  // How a dataset (labelled images, data/dataset.h) feeds a model of this
  // task, so that the trainer and the option resolution name no image fact.
  // The defaults (task.cpp) serve every task: one whose inputs are an image
  // and a label, and whose model states its channels (ModelSpec::channels),
  // reads datasets; any other is told what the data lacks.

  /// Why the dataset `data_name` cannot feed a model of `spec`, or "" when it
  /// can: checked before the data is opened.
  virtual std::string dataset_mismatch(const ModelSpec& spec, const ModelOptions& options,
                                       const std::string& data_name) const;
  /// The channels a dataset's images are decoded to for `spec` (0: it reads none).
  virtual int64_t dataset_channels(const ModelSpec& spec) const;
  /// `options` resolved against `spec` (resolve_options), where a dataset
  /// was opened (`info`; nullptr: synthetic data) with what it implies
  /// filled in where the options leave it to the data (0: image size, classes).
  virtual ModelOptions shaped_by_data(const ModelSpec& spec, ModelOptions options,
                                      const data::DatasetInfo* info) const;
  /// Fills the batches' shape a data source makes for a model of `spec` at
  /// resolved `options` (images' channels, size, classes; channels-last
  /// when `channels_last`).
  virtual void shape_source(const ModelSpec& spec, const ModelOptions& options, bool channels_last,
                            data::SourceOptions& source) const;
};

/// Where held-out synthetic samples start: 2^62, beyond any training sample
/// (step × global batch).
inline constexpr uint64_t kSyntheticTestIndex = uint64_t{1} << 62;

/// A sample of zeros (integer inputs at their `low`) with a batch dimension
/// of 1: the probe a model's FLOPs are counted with.
TensorMap probe_inputs(const std::vector<TensorSpec>& specs);

/// A shape as text, "3x32x32"; "" for a scalar's.
std::string shape_text(c10::IntArrayRef sizes);

/// What a model reads per sample, for listings: a lone input as its shape
/// ("3x224x224"), several as names and shapes ("src 128, tgt_in 128"; "user, item").
std::string input_text(const std::vector<TensorSpec>& inputs);

/// One line naming what `provides` lacks of what the task needs, or "" when
/// it can feed it: "dataset X provides image, label; model M (task T) needs tokens".
std::string feed_mismatch(const ModelSpec& spec, const ModelOptions& options, const data::Provides& provides,
                          const std::string& data_name);

/// One line naming the first tensor of `batch` that does not fit the task
/// (dtype, sizes after the batch dimension unless they vary, integer IDs
/// outside [low, high)), or "" when it fits: "data X does not fit model M:
/// 'image' is 1x28x28 Float a sample; the task declares 3x32x32 Float".
std::string batch_mismatch(const ModelSpec& spec, const ModelOptions& options,
                           const data::Batch& batch, const std::string& data_name);

/// The task of every image classifier of the zoo.
std::shared_ptr<const Task> image_classification();

/// Sequence to sequence (transformer, gnmt): source tokens and the target
/// shifted right in, target tokens out; label-smoothed cross-entropy, token
/// accuracy, throughput in target tokens (seq2seq_task.cpp).
std::shared_ptr<const Task> translation();

/// Implicit-feedback recommendation (ncf) over `users` and `items`: a user
/// and an item in, a score out; binary cross-entropy, hit rate at 10
/// (recommendation_task.cpp).
std::shared_ptr<const Task> recommendation(int64_t users, int64_t items);

/// Object detection (ssd300): an image in, per default box 4 offsets and a
/// score per class out; multibox loss with hard-negative mining, matched-box
/// accuracy and IoU, throughput in images (detection_task.cpp).
std::shared_ptr<const Task> detection();

}  // namespace dlscale::models
