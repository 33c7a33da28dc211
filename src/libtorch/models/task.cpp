#include "libtorch/models/task.h"

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>

#include <algorithm>

#include "core/text.h"
#include "data/dataset.h"
#include "data/sampler.h"
#include "libtorch/data/data_spec.h"
#include "libtorch/models/model.h"

namespace dlscale::models {

namespace {

torch::Tensor draw(const TensorSpec& t, at::Generator& gen) {
  if (isIntegralType(t.dtype, /*includeBool=*/false)) {
    return torch::randint(t.low, std::max(t.high, t.low + 1), t.shape, gen,
                          torch::TensorOptions().dtype(t.dtype));
  }
  return torch::randn(t.shape, gen, torch::TensorOptions().dtype(t.dtype));
}

std::string joined(const std::vector<std::string>& names) {
  return names.empty() ? "nothing" : join(names, ", ");
}

/// The names of `specs` missing from `have`.
std::vector<std::string> missing(const std::vector<TensorSpec>& specs, const std::vector<std::string>& have) {
  std::vector<std::string> out;
  for (const auto& t : specs) {
    if (std::find(have.begin(), have.end(), t.name) == have.end()) out.push_back(t.name);
  }
  return out;
}

}  // namespace

data::SampleFn Task::synthetic(const ModelSpec& spec, const ModelOptions& options, uint64_t seed) const {
  return [in = inputs(spec, options), out = targets(spec, options), seed](uint64_t index) {
    at::Generator gen = at::detail::createCPUGenerator(data::mix_seed(seed, index));
    data::Sample s;
    for (const auto& t : in) s.inputs[t.name] = draw(t, gen);
    for (const auto& t : out) s.targets[t.name] = draw(t, gen);
    return s;
  };
}

data::SampleFn Task::synthetic_test(const ModelSpec& spec, const ModelOptions& options, uint64_t seed) const {
  return [train = synthetic(spec, options, seed)](uint64_t j) { return train(kSyntheticTestIndex + j); };
}

std::string Task::dataset_mismatch(const ModelSpec& spec, const ModelOptions& options,
                                   const std::string& data_name) const {
  const std::string mismatch =
      feed_mismatch(spec, options, data::Provides{{data::kImage}, {data::kLabel}}, data_name);
  if (!mismatch.empty()) return mismatch;
  // A declared task's 'image' that is not C x S x S floats: no size to read images at.
  if (spec.channels <= 0) {
    return fmt::format(
        "data '{}' holds images; model '{}' ({}) reads {}: declare 'image' as C x S x S float32 to "
        "read them",
        data_name, spec.name, name(), input_text(inputs(spec, options)));
  }
  if (spec.channels != 1 && spec.channels != 3) {
    return fmt::format("data '{}' holds images of 1 or 3 channels; model '{}' takes {}", data_name,
                       spec.name, spec.channels);
  }
  return "";
}

int64_t Task::dataset_channels(const ModelSpec& spec) const { return spec.channels; }

ModelOptions Task::shaped_by_data(const ModelSpec& spec, ModelOptions options,
                                  const data::DatasetInfo* info) const {
  if (info != nullptr && spec.takes_flag("--image-size")) {  // else the data cannot shape it
    // A dataset whose sizes vary has image_size 0: the model's default follows.
    if (options.image_size == 0) options.image_size = info->image_size;
    if (options.num_classes == 0) options.num_classes = info->num_classes;
  }
  return resolve_options(spec, options);
}

void Task::shape_source(const ModelSpec& spec, const ModelOptions& options, bool channels_last,
                        data::SourceOptions& source) const {
  source.channels = dataset_channels(spec);
  source.image_size = options.image_size;
  source.num_classes = options.num_classes;
  source.channels_last = channels_last;
}

TensorMap probe_inputs(const std::vector<TensorSpec>& specs) {
  TensorMap m;
  for (const auto& t : specs) {
    std::vector<int64_t> shape{1};
    shape.insert(shape.end(), t.shape.begin(), t.shape.end());
    m[t.name] = torch::full(shape, isIntegralType(t.dtype, false) ? t.low : 0,
                            torch::TensorOptions().dtype(t.dtype));
  }
  return m;
}

std::string shape_text(c10::IntArrayRef sizes) {
  std::vector<std::string> dims;
  for (const int64_t d : sizes) dims.push_back(std::to_string(d));
  return join(dims, "x");
}

std::string input_text(const std::vector<TensorSpec>& inputs) {
  std::string text;
  for (const auto& t : inputs) {
    const std::string shape = shape_text(t.shape);
    const std::string one = inputs.size() == 1 && !shape.empty() ? shape
                            : shape.empty()                      ? t.name
                                                                 : t.name + " " + shape;
    text += (text.empty() ? "" : ", ") + one;
  }
  return text;
}

std::string feed_mismatch(const ModelSpec& spec, const ModelOptions& options, const data::Provides& provides,
                          const std::string& data_name) {
  const Task& task = *spec.task;
  std::vector<std::string> lacks = missing(task.inputs(spec, options), provides.inputs);
  const std::vector<std::string> lacks_targets = missing(task.targets(spec, options), provides.targets);
  lacks.insert(lacks.end(), lacks_targets.begin(), lacks_targets.end());
  if (lacks.empty()) return "";
  std::vector<std::string> has = provides.inputs;
  has.insert(has.end(), provides.targets.begin(), provides.targets.end());
  return fmt::format("data '{}' provides {}; model '{}' ({}) needs {} too", data_name, joined(has), spec.name,
                     task.name(), joined(lacks));
}

namespace {

/// A sample's tensor in words: "1x28x28 Float", "one Long".
std::string tensor_words(c10::IntArrayRef sizes, torch::ScalarType dtype) {
  return fmt::format("{} {}", sizes.empty() ? "one" : shape_text(sizes), c10::toString(dtype));
}

/// What is wrong with `t` (a batch's tensor) for `spec`, or "".
std::string tensor_mismatch(const TensorSpec& spec, const torch::Tensor& t) {
  const std::vector<int64_t> sizes(t.sizes().begin() + std::min<int64_t>(1, t.dim()),
                                   t.sizes().end());
  if (t.scalar_type() != spec.dtype || (!spec.varies && sizes != spec.shape)) {
    return fmt::format("'{}' is {} a sample; the task declares {}", spec.name,
                       tensor_words(sizes, t.scalar_type()), tensor_words(spec.shape, spec.dtype));
  }
  if (!isIntegralType(spec.dtype, /*includeBool=*/false) || spec.high <= spec.low || t.numel() == 0)
    return "";
  const int64_t low = t.min().item<int64_t>(), high = t.max().item<int64_t>();
  if (low >= spec.low && high < spec.high) return "";
  return fmt::format("'{}' holds values in [{}, {}]; the task declares [{}, {})", spec.name, low,
                     high, spec.low, spec.high);
}

}  // namespace

std::string batch_mismatch(const ModelSpec& spec, const ModelOptions& options,
                           const data::Batch& batch, const std::string& data_name) {
  const Task& task = *spec.task;
  for (const auto& [specs, tensors] : {std::pair{task.inputs(spec, options), &batch.inputs},
                                       std::pair{task.targets(spec, options), &batch.targets}}) {
    for (const auto& t : specs) {
      const auto it = tensors->find(t.name);
      if (it == tensors->end()) continue;  // feed_mismatch() named it
      const std::string what = tensor_mismatch(t, it->second);
      if (!what.empty())
        return fmt::format("data '{}' does not fit model '{}': {}", data_name, spec.name, what);
    }
  }
  return "";
}

}  // namespace dlscale::models
