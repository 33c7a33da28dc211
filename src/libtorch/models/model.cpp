#include "libtorch/models/model.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "core/error.h"
#include "core/log.h"
#include "core/text.h"
#include "libtorch/compute/torch_compat.h"
#include "libtorch/models/layers.h"
#include "libtorch/models/script_model.h"
#include "libtorch/models/zoo.h"

namespace dlscale::models {

namespace {

std::vector<ModelSpec>& registry() {
  static std::vector<ModelSpec> specs = [] {
    std::vector<ModelSpec> all;
    all.push_back(lenet_spec());
    all.push_back(tinycnn_spec());
    all.push_back(alexnet_spec());
    for (auto& s : vgg_specs()) all.push_back(std::move(s));
    for (auto& s : resnet_specs()) all.push_back(std::move(s));
    all.push_back(googlenet_spec());
    all.push_back(inception3_spec());
    for (auto& s : transformer_specs()) all.push_back(std::move(s));
    all.push_back(gnmt_spec());
    all.push_back(ncf_spec());
    all.push_back(ssd300_spec());
    all.push_back(maskrcnn_spec());
    return all;
  }();
  return specs;
}

}  // namespace

const std::vector<ModelSpec>& model_specs() { return registry(); }

void Model::use_memory_format(bool channels_last) {
  torch::NoGradGuard no_grad;
  for (auto& p : parameters()) {
    if (p.dim() == 4) p.set_data(compat::with_memory_format(p, channels_last));
  }
}

ModelSpec image_classifier_spec(std::string name, std::string description) {
  ModelSpec s;
  s.name = std::move(name);
  s.description = std::move(description);
  s.task = image_classification();
  s.family = "cnn";
  s.takes = {"--image-size", "--classes"};
  s.channels = 3;
  s.default_image_size = 224;
  s.default_classes = 1000;
  return s;
}

ModelSpec non_image_spec(std::string name, std::string description, std::shared_ptr<const Task> task,
                         std::string family, std::vector<std::string> takes) {
  ModelSpec s;
  s.name = std::move(name);
  s.description = std::move(description);
  s.task = std::move(task);
  s.family = std::move(family);
  s.takes = std::move(takes);
  return s;
}

void register_model(ModelSpec spec) {
  DLSCALE_CHECK(!spec.name.empty() && spec.task != nullptr && spec.make != nullptr,
                "model '{}' needs a name, a task and a factory to be registered", spec.name);
  for (const auto& s : registry()) {
    DLSCALE_CHECK(s.name != spec.name, "model '{}' is registered already", spec.name);
  }
  registry().push_back(std::move(spec));
}

std::string known_model_names() {
  std::vector<std::string> names;
  for (const auto& s : model_specs()) names.push_back(s.name);
  return join(names, ", ");
}

const ModelSpec& find_model(const std::string& name) {
  for (const auto& s : model_specs()) {
    if (s.name == name) return s;
  }
  throw Error(
      fmt::format("unknown model '{}'; known models: {} (or your own TorchScript module: PATH.pt, "
                  "script:PATH)",
                  name, known_model_names()));
}

const ModelSpec& model_spec(const ModelOptions& options) {
  if (is_script_model(options.name)) return script_model_spec(options);
  DLSCALE_CHECK(options.task_file.empty(),
                "--task-file declares the task of a TorchScript model (PATH.pt); model '{}' of the "
                "zoo has its own",
                options.name);
  return find_model(options.name);
}

bool ModelSpec::takes_flag(const std::string& flag) const {
  return std::find(takes.begin(), takes.end(), flag) != takes.end();
}

namespace {

/// A flag set for a model whose family does not take it: one line naming both.
void check_takes(const ModelSpec& spec, const std::string& flag, bool set) {
  if (!set || spec.takes_flag(flag)) return;
  const std::string list = join(spec.takes, ", ");
  throw Error(fmt::format("{} does not apply to model '{}' (family {}); it takes {}", flag, spec.name,
                          spec.family, list.empty() ? "no model flag but --dropout" : list + " and --dropout"));
}

/// A count flag of `spec` (--hidden, --rois, --backbone-batch): when the
/// model takes it, 0 becomes `fallback` (the model's default), and the
/// count must be at least 1.
void resolve_count(const ModelSpec& spec, const char* flag, int64_t& value, int64_t fallback) {
  if (!spec.takes_flag(flag)) return;
  if (value == 0) value = fallback;
  DLSCALE_CHECK(value >= 1, "{} must be >= 1 (got {})", flag, value);
}

}  // namespace

ModelOptions resolve_options(const ModelSpec& spec, ModelOptions o) {
  // A model of one image size (ssd300) takes no --image-size, but its own
  // (which resolving sets) is no error.
  const bool one_size = !spec.takes_flag("--image-size") && spec.channels > 0;
  check_takes(spec, "--image-size",
              o.image_size != 0 && !(one_size && o.image_size == spec.default_image_size));
  check_takes(spec, "--classes", o.num_classes != 0);
  check_takes(spec, "--aux-logits", o.aux_logits);
  check_takes(spec, "--vocab", o.vocab != 0);
  check_takes(spec, "--seq-len", o.seq_len != 0);
  check_takes(spec, "--min-seq-len", o.min_seq_len != 0);
  check_takes(spec, "--ambiguity", o.ambiguity != 0);
  check_takes(spec, "--hidden", o.hidden != 0);
  check_takes(spec, "--sparse-embeddings", o.sparse_embeddings);
  check_takes(spec, "--rois", o.rois != 0);
  check_takes(spec, "--backbone-batch", o.backbone_batch != 0);
  DLSCALE_CHECK(o.dropout < 1, "--dropout must be < 1 (got {}; negative = the model's own)", o.dropout);
  if (spec.takes_flag("--vocab")) {
    DLSCALE_CHECK(!spec.fixed_vocab || o.vocab == 0 || o.vocab == spec.default_vocab,
                  "model '{}' has a vocabulary of {} (its output); --vocab must match (got {})",
                  spec.name, spec.default_vocab, o.vocab);
    if (o.vocab == 0) o.vocab = spec.default_vocab;
    if (o.seq_len == 0) o.seq_len = spec.default_seq_len;
    DLSCALE_CHECK(o.vocab >= 4, "--vocab must be >= 4 (got {})", o.vocab);
    DLSCALE_CHECK(o.seq_len >= 1, "--seq-len must be >= 1 (got {})", o.seq_len);
    if (o.min_seq_len == 0) o.min_seq_len = o.seq_len;
    DLSCALE_CHECK(o.min_seq_len >= 1 && o.min_seq_len <= o.seq_len,
                  "--min-seq-len must be in [1, --seq-len = {}] (got {})", o.seq_len,
                  o.min_seq_len);
    DLSCALE_CHECK(
        o.ambiguity >= 0 && o.ambiguity < 0.5,
        "--ambiguity must be in [0, 0.5): a word's first translation stays the likelier (got {})",
        o.ambiguity);
  }
  resolve_count(spec, "--hidden", o.hidden, spec.default_hidden);
  resolve_count(spec, "--rois", o.rois, spec.default_rois);
  resolve_count(spec, "--backbone-batch", o.backbone_batch, spec.default_backbone_batch);
  if (spec.takes_flag("--classes")) {
    DLSCALE_CHECK(
        !spec.fixed_classes || o.num_classes == 0 || o.num_classes == spec.default_classes,
        "model '{}' has {} classes (its output); --classes or the data's classes ({}) must match",
        spec.name, spec.default_classes, o.num_classes);
    if (o.num_classes == 0) o.num_classes = spec.default_classes;
    DLSCALE_CHECK(o.num_classes >= spec.min_classes, "--classes must be >= {}{} (got {})",
                  spec.min_classes,
                  spec.min_classes > 1
                      ? fmt::format(" for model '{}' (the background and a class)", spec.name)
                      : "",
                  o.num_classes);
  }
  if (!spec.takes_flag("--image-size")) {
    if (one_size) o.image_size = spec.default_image_size;
    return o;
  }
  if (o.image_size == 0) o.image_size = spec.default_image_size;
  DLSCALE_CHECK(o.image_size >= 1, "--image-size must be >= 1 (got {})", o.image_size);
  const int64_t min_size = o.aux_logits ? spec.min_image_size_aux : spec.min_image_size;
  DLSCALE_CHECK(o.image_size >= min_size,
                "model '{}' needs --image-size >= {}{} (got {})", spec.name, min_size,
                o.aux_logits ? " with auxiliary classifiers" : "", o.image_size);
  return o;
}

std::shared_ptr<Model> make_model(const ModelSpec& spec, const ModelOptions& options) {
  return spec.make(resolve_options(spec, options));
}

int64_t count_parameters(torch::nn::Module& model) {
  int64_t n = 0;
  for (const auto& p : model.parameters()) n += p.numel();
  return n;
}

int64_t count_macs_per_sample(Model& model, const TensorMap& probe) {
  std::vector<MacCounter*> counters;
  for (auto& m : model.modules(/*include_self=*/false)) {
    if (auto* c = dynamic_cast<MacCounter*>(m.get())) {
      c->clear_macs();
      counters.push_back(c);
    }
  }
  const bool was_training = model.is_training();
  model.eval();
  {
    torch::NoGradGuard no_grad;
    model.forward(probe);
  }
  model.train(was_training);
  int64_t macs = 0;
  for (auto* c : counters) macs += c->last_macs_per_sample();
  return macs;
}

namespace {

/// The kind of a torch::nn layer that does work the count would miss, or null.
const char* uncounted_kind(torch::nn::Module& m) {
  namespace nn = torch::nn;
  if (dynamic_cast<MacCounter*>(&m) != nullptr) return nullptr;
  if (dynamic_cast<nn::LinearImpl*>(&m) != nullptr) return "Linear";
  if (dynamic_cast<nn::BilinearImpl*>(&m) != nullptr) return "Bilinear";
  if (dynamic_cast<nn::Conv1dImpl*>(&m) != nullptr || dynamic_cast<nn::Conv2dImpl*>(&m) != nullptr ||
      dynamic_cast<nn::Conv3dImpl*>(&m) != nullptr)
    return "Conv";
  if (dynamic_cast<nn::ConvTranspose1dImpl*>(&m) != nullptr ||
      dynamic_cast<nn::ConvTranspose2dImpl*>(&m) != nullptr ||
      dynamic_cast<nn::ConvTranspose3dImpl*>(&m) != nullptr)
    return "ConvTranspose";
  if (dynamic_cast<nn::LSTMImpl*>(&m) != nullptr) return "LSTM";
  if (dynamic_cast<nn::GRUImpl*>(&m) != nullptr) return "GRU";
  if (dynamic_cast<nn::RNNImpl*>(&m) != nullptr) return "RNN";
  if (dynamic_cast<nn::MultiheadAttentionImpl*>(&m) != nullptr) return "MultiheadAttention";
  return nullptr;
}

}  // namespace

std::vector<std::string> uncounted_layers(Model& model) {
  std::vector<std::string> counters, out;  // paths of the counting modules
  for (const auto& item : model.named_modules("", /*include_self=*/false)) {
    const std::string& path = item.key();
    const bool inside = std::any_of(counters.begin(), counters.end(), [&](const std::string& c) {
      return path.rfind(c + ".", 0) == 0;
    });
    if (inside) continue;
    if (dynamic_cast<MacCounter*>(item.value().get()) != nullptr) {
      counters.push_back(path);
    } else if (const char* kind = uncounted_kind(*item.value())) {
      out.push_back(fmt::format("{} ({})", path, kind));
    }
  }
  return out;
}

ModelFacts measure_model(const ModelSpec& spec, const ModelOptions& o, Model& model) {
  ModelFacts f;
  f.name = spec.name;
  f.channels = spec.channels;
  f.image_size = o.image_size;
  f.num_classes = o.num_classes;
  f.vocab = o.vocab;
  f.seq_len = o.seq_len;
  f.hidden = o.hidden;
  f.family = spec.family;
  f.file_digest = spec.file_digest;
  f.parameters = count_parameters(model);
  f.task = spec.task->name();
  f.unit = spec.task->unit(spec, o);
  f.inputs = spec.task->inputs(spec, o);
  const TensorMap probe = probe_inputs(f.inputs);
  // A model that counts its own MACs (a TorchScript module, by operators)
  // names the operators it missed; the zoo's counting layers name layers.
  const std::optional<OpCount> own = model.own_macs(probe);
  f.macs_per_sample = own ? own->macs : count_macs_per_sample(model, probe);
  f.uncounted_layers = own ? own->uncounted : uncounted_layers(model);
  if (!f.uncounted_layers.empty()) {
    DLSCALE_LOG_WARN(
        "model '{}': {} {} count no FLOPs ({}{}); its FLOPs per sample and est. GFLOP/s are too "
        "low{}",
        spec.name, f.uncounted_layers.size(), own ? "operator(s)" : "layer(s)",
        f.uncounted_layers.front(), f.uncounted_layers.size() > 1 ? ", ..." : "",
        own ? "" : ". Build them from libtorch/models/layers.h's Fc and Conv, or count them (MacCounter)");
  }
  return f;
}

ModelFacts describe_model(const ModelSpec& spec, const ModelOptions& options) {
  const ModelOptions o = resolve_options(spec, options);
  return measure_model(spec, o, *spec.make(o));
}

namespace {

/// Each parameter's index in model.parameters(), by its tensor.
std::map<const void*, size_t> parameter_index(const Model& model) {
  std::map<const void*, size_t> index;
  const std::vector<torch::Tensor> params = model.parameters();
  for (size_t k = 0; k < params.size(); ++k) index[params[k].unsafeGetTensorImpl()] = k;
  return index;
}

}  // namespace

std::vector<std::vector<size_t>> unit_parameters(const Model& model) {
  const std::map<const void*, size_t> index = parameter_index(model);
  std::vector<std::vector<size_t>> units;
  std::vector<int> owners(index.size(), 0);
  for (const auto& unit : model.units()) {
    std::vector<size_t> mine;
    for (const auto& p : unit->parameters()) {
      const auto it = index.find(p.unsafeGetTensorImpl());
      if (it == index.end()) continue;  // not trainable
      mine.push_back(it->second);
      ++owners[it->second];
    }
    units.push_back(std::move(mine));
  }
  for (auto& unit : units) {
    unit.erase(std::remove_if(unit.begin(), unit.end(), [&](size_t k) { return owners[k] > 1; }), unit.end());
  }
  return units;
}

std::vector<size_t> sparse_gradient_parameters(const Model& model) {
  const std::map<const void*, size_t> index = parameter_index(model);
  std::vector<size_t> out;
  for (const auto& m : model.modules(/*include_self=*/false)) {
    const auto* e = m->as<torch::nn::EmbeddingImpl>();
    if (e == nullptr || !e->options.sparse()) continue;
    if (const auto it = index.find(e->weight.unsafeGetTensorImpl()); it != index.end()) out.push_back(it->second);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace dlscale::models
