#include "libtorch/models/script_model.h"

#include <fmt/format.h>
#include <torch/script.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "core/error.h"
#include "core/files.h"
#include "core/hash.h"
#include "core/sysinfo.h"
#include "core/text.h"
#include "libtorch/models/op_count.h"
#include "models/recommendation.h"
#include "libtorch/models/seq2seq.h"

namespace dlscale::models {

namespace {

constexpr int64_t kDefaultImageSize = 224;
constexpr int64_t kDefaultSeqLen = 128;

/// The line of a LibTorch or TorchScript error that says what went wrong:
/// the interpreter's last line ("builtins.ValueError: ..."), or the first.
std::string torch_error_line(const std::exception& e) {
  const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
  const std::string text = c10_error != nullptr ? c10_error->what_without_backtrace() : e.what();
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.find_first_not_of(" \t") != std::string::npos) lines.push_back(line);
  }
  if (lines.empty()) return "(no message)";
  const bool traceback = lines.front().find("TorchScript interpreter") != std::string::npos;
  return printable(traceback ? lines.back() : lines.front());
}

/// Mirrors a TorchScript module's parameters and buffers into `holder`
/// under the same names (the tensors are shared, not copied), so that
/// strategies, optimizers and checkpoints see them as a zoo model's.
/// Frozen parameters (requires_grad False) are kept as buffers.
void mirror(torch::nn::Module& holder, const torch::jit::Module& module) {
  for (const auto& p : module.named_parameters(/*recurse=*/false)) {
    if (!p.value.defined()) continue;
    if (p.value.requires_grad()) {
      holder.register_parameter(p.name, p.value);
    } else {
      holder.register_buffer(p.name, p.value);
    }
  }
  for (const auto& b : module.named_buffers(/*recurse=*/false)) {
    if (b.value.defined()) holder.register_buffer(b.name, b.value);
  }
  for (const auto& child : module.named_children()) {
    auto h = std::make_shared<torch::nn::Module>();
    mirror(*h, child.value);
    holder.register_module(child.name, h);
  }
}

/// The main output of `module`'s forward over `inputs`, taken in `order`:
/// the tensor it returns, or the first of a tuple. A failure in forward is
/// one line, "model 'NAME' failed in forward{where}: ...".
torch::Tensor main_output(const std::string& name, torch::jit::Module& module,
                          const std::vector<std::string>& order, const TensorMap& inputs,
                          const std::string& where = "") {
  std::vector<c10::IValue> args;
  for (const auto& n : order) args.emplace_back(inputs.at(n));
  c10::IValue out;
  try {
    out = module.forward(args);
  } catch (const std::exception& e) {
    throw Error(
        fmt::format("model '{}' failed in forward{}: {}", name, where, torch_error_line(e)));
  }
  if (out.isTuple() && !out.toTupleRef().elements().empty()) out = out.toTupleRef().elements()[0];
  DLSCALE_CHECK(out.isTensor(),
                "model '{}': forward returned {}, not a tensor (or a tuple whose first is one)",
                name, out.tagKind());
  return out.toTensor();
}

class ScriptModel : public Model {
 public:
  ScriptModel(torch::jit::Module module, std::vector<std::string> order, std::string name)
      : module_(std::move(module)), order_(std::move(order)), name_(std::move(name)) {
    mirror(*this, module_);
  }

  Output forward(const TensorMap& inputs) override {
    return {main_output(name_, module_, order_, inputs), {}};
  }

  void train(bool on) override {
    Model::train(on);
    module_.train(on);
  }

  std::optional<OpCount> own_macs(const TensorMap& probe) override {
    const bool was_training = is_training();
    eval();
    OpCount count = count_op_macs([&] {
      torch::NoGradGuard no_grad;
      forward(probe);
    });
    train(was_training);
    return count;
  }

 private:
  torch::jit::Module module_;
  std::vector<std::string> order_;  ///< the inputs' names in forward's order
  std::string name_;
};

std::string path_of(const std::string& name) {
  return name.rfind("script:", 0) == 0 ? name.substr(7) : name;
}

/// Refuses what cannot be a module before LibTorch reads it: nothing there,
/// a special file, an empty file, or one that could not be held N times in
/// this machine's memory (each local worker loads its own copy).
void check_module_file(const std::string& name, const std::string& path) {
  const std::string kind = special_file_kind(path);
  DLSCALE_CHECK(kind.empty(), "model '{}' is {}, not a TorchScript file", name, kind);
  check_readable(path);
  std::error_code ec;
  const auto size = static_cast<int64_t>(std::filesystem::file_size(path, ec));
  DLSCALE_CHECK(!ec && size > 0, "model '{}' is an empty file, not a TorchScript module", name);
  const int64_t available = available_memory_bytes();
  DLSCALE_CHECK(available < 0 || size <= available / 4,
                "model '{}' is {:.1f} GiB; this machine has {:.1f} GiB available, and a module "
                "larger than a quarter of that is refused (each worker holds it, its gradients "
                "and its optimizer state)",
                name, static_cast<double>(size) / (1 << 30),
                static_cast<double>(available) / (1 << 30));
}

torch::jit::Module load_module(const std::string& name) {
  const std::string path = path_of(name);
  check_module_file(name, path);
  try {
    return torch::jit::load(path, torch::kCPU);
  } catch (const std::exception& e) {
    throw Error(fmt::format("model '{}' is not a TorchScript module that LibTorch {} can load: {}",
                            name, TORCH_VERSION, torch_error_line(e)));
  }
}

/// The order in which forward takes `inputs`: by name when its arguments
/// are the inputs' names, else by position.
std::vector<std::string> argument_order(const std::string& name, const torch::jit::Module& module,
                                        const std::vector<TensorSpec>& inputs) {
  const auto& args = module.get_method("forward").function().getSchema().arguments();
  std::vector<std::string> arg_names, declared;
  for (size_t i = 1; i < args.size(); ++i) arg_names.push_back(args[i].name());  // [0] is self
  for (const auto& t : inputs) declared.push_back(t.name);
  const std::string args_text = join(arg_names, ", "), declared_text = join(declared, ", ");
  DLSCALE_CHECK(arg_names.size() == declared.size(),
                "model '{}': forward({}) takes {} input(s); the task declares {}: {}", name,
                args_text, arg_names.size(), declared.size(), declared_text);
  std::vector<std::string> sorted_args = arg_names, sorted_declared = declared;
  std::sort(sorted_args.begin(), sorted_args.end());
  std::sort(sorted_declared.begin(), sorted_declared.end());
  return sorted_args == sorted_declared ? arg_names : declared;
}

/// "BYTES:FNV1A" of a file's contents, read in 1 MiB pieces.
std::string digest_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  DLSCALE_CHECK(in.good(), "cannot read '{}'", path);
  std::vector<char> piece(size_t{1} << 20);
  uint64_t h = kFnv1aOffset;
  int64_t bytes = 0;
  while (in) {
    in.read(piece.data(), static_cast<std::streamsize>(piece.size()));
    const auto got = static_cast<size_t>(in.gcount());
    h = fnv1a(piece.data(), got, h);
    bytes += static_cast<int64_t>(got);
  }
  return fmt::format("{}:{:016x}", bytes, h);
}

/// The module's main output for one sample of `inputs`, in eval mode.
torch::Tensor probe_output(const std::string& name, torch::jit::Module& module,
                           const std::vector<std::string>& order,
                           const std::vector<TensorSpec>& inputs, const std::string& hint) {
  module.eval();
  torch::NoGradGuard no_grad;
  return main_output(
      name, module, order, probe_inputs(inputs),
      fmt::format(" on one sample of the declared inputs ({}{})", input_text(inputs), hint));
}

/// The spec of a declared task's module. Where it declares what an image
/// dataset gives (an `image` of C x S x S floats, a `label` of int64
/// classes [0, K)), the spec says so too, so that real images are read at
/// that size and their labels checked against K (not --image-size or
/// --classes: the task file fixes them).
ModelSpec declared_spec(const ModelOptions& o, const TaskDecl& decl) {
  ModelSpec s = non_image_spec(o.name, "", declared_task(decl), "script", {});
  for (const auto& t : decl.inputs) {
    if (t.name == data::kImage && t.dtype == "float32" && t.shape.size() == 3 &&
        t.shape[1] == t.shape[2]) {
      s.channels = t.shape[0];
      s.default_image_size = t.shape[1];
    }
  }
  const TensorDecl& y = decl.target;
  if (y.name == data::kLabel && y.dtype == "int64" && y.shape.empty() && y.low == 0) {
    s.takes = {"--classes"};
    s.default_classes = y.high;
    s.fixed_classes = true;
  }
  return s;
}

/// The spec of a module of task `decl` before its probe: the task, the
/// flags it takes and the input sizes the probe is built at.
ModelSpec spec_before_probe(const ModelOptions& o, const TaskDecl& decl) {
  if (decl.builtin.empty()) return declared_spec(o, decl);
  if (decl.builtin == "translation") {
    ModelSpec s = non_image_spec(o.name, "", translation(), "script",
                                 {"--vocab", "--seq-len", "--min-seq-len", "--ambiguity"});
    s.default_seq_len = o.seq_len > 0      ? o.seq_len
                        : decl.seq_len > 0 ? decl.seq_len
                                           : kDefaultSeqLen;
    // The probe's tokens are kFirstWord and kBeginToken; its output says the vocabulary.
    s.default_vocab = kFirstWord + 2;
    return s;
  }
  if (decl.builtin == "recommendation") {
    return non_image_spec(o.name, "", recommendation(decl.users, decl.items), "script", {});
  }
  ModelSpec s = image_classifier_spec(o.name, "");
  s.channels = decl.channels;
  s.default_image_size = o.image_size > 0      ? o.image_size
                         : decl.image_size > 0 ? decl.image_size
                                               : kDefaultImageSize;
  s.default_classes = 1;  // until the probe says
  return s;
}

/// Checks the probe's output `out` against the task and takes from it what
/// the module fixes (an image classifier's classes, a translator's
/// vocabulary). A recommender is probed again as evaluation calls it: a
/// user with its candidate items.
void adopt_output(ModelSpec& s, const TaskDecl& decl, const torch::Tensor& out,
                  torch::jit::Module& module, const std::vector<std::string>& order) {
  const std::string& name = s.name;
  const std::string got =
      fmt::format("{} {}", shape_text(out.sizes()), c10::toString(out.scalar_type()));
  if (decl.builtin.empty()) {
    const std::string mismatch = output_mismatch(decl, out);
    DLSCALE_CHECK(mismatch.empty(), "model '{}': {}", name, mismatch);
  } else if (decl.builtin == "translation") {
    DLSCALE_CHECK(out.dim() == 3 && out.size(0) == 1 && out.size(1) == s.default_seq_len &&
                      out.size(2) > kFirstWord + 1 && out.is_floating_point(),
                  "model '{}': its output for one sequence of {} tokens is {}; translation's is "
                  "1 x {} x vocabulary (> {}), float",
                  name, s.default_seq_len, got, s.default_seq_len, kFirstWord + 1);
    s.default_vocab = out.size(2);
    s.fixed_vocab = true;
  } else if (decl.builtin == "recommendation") {
    DLSCALE_CHECK(out.dim() == 1 && out.size(0) == 1 && out.is_floating_point(),
                  "model '{}': its output for one user and item is {}; recommendation's is 1 "
                  "score, float",
                  name, got);
    const torch::Tensor ranked = main_output(
        name, module, order,
        {{kUser, torch::zeros({1}, torch::kInt64)},
         {kItem, torch::zeros({1, kEvalCandidates}, torch::kInt64)}},
        fmt::format(" on one user with {} candidate items (as HR@10 evaluates)", kEvalCandidates));
    DLSCALE_CHECK(ranked.dim() == 2 && ranked.size(0) == 1 && ranked.size(1) == kEvalCandidates,
                  "model '{}': its output for one user and {} candidate items ([1] and [1, {}]) "
                  "is {}; HR@10 needs 1 x {} scores",
                  name, kEvalCandidates, kEvalCandidates, shape_text(ranked.sizes()),
                  kEvalCandidates);
  } else {
    DLSCALE_CHECK(out.dim() == 2 && out.size(0) == 1 && out.size(1) >= 1 && out.is_floating_point(),
                  "model '{}': its output for one {}x{}x{} image is {}; an image classifier's "
                  "is 1 x classes, float",
                  name, s.channels, s.default_image_size, s.default_image_size, got);
    s.default_classes = out.size(1);
    s.fixed_classes = true;
  }
}

ModelSpec build_spec(const ModelOptions& o) {
  TaskDecl decl;
  decl.builtin = decl.name = "image-classification";
  if (!o.task_file.empty()) decl = read_task_file(o.task_file);
  torch::jit::Module module = load_module(o.name);
  int64_t trainable = 0;
  for (const auto& p : module.parameters()) trainable += p.requires_grad() ? p.numel() : 0;
  DLSCALE_CHECK(trainable > 0, "model '{}' has no trainable parameters: nothing to train", o.name);
  ModelSpec s = spec_before_probe(o, decl);
  s.name = o.name;
  s.family = "script";
  s.checks_batches = true;
  s.default_label_smoothing = decl.label_smoothing;
  ModelOptions shaped = o;
  shaped.image_size = s.default_image_size;
  shaped.num_classes = s.default_classes;
  shaped.vocab = s.default_vocab;
  shaped.seq_len = s.default_seq_len;
  const std::vector<TensorSpec> inputs = s.task->inputs(s, shaped);
  const std::vector<std::string> order = argument_order(o.name, module, inputs);
  const bool default_size =
      decl.builtin == "image-classification" && o.image_size == 0 && decl.image_size == 0;
  const torch::Tensor out = probe_output(o.name, module, order, inputs,
                                         default_size ? "; --image-size sets the size" : "");
  adopt_output(s, decl, out, module, order);
  s.file_digest =
      digest_of(path_of(o.name)) + (o.task_file.empty() ? "" : " " + digest_of(o.task_file));
  s.description = fmt::format("TorchScript module, task {}{}", decl.name,
                              o.task_file.empty() ? "" : " (" + o.task_file + ")");
  s.make = [name = o.name, order](const ModelOptions&) {
    return std::make_shared<ScriptModel>(load_module(name), order, name);
  };
  return s;
}

/// What identifies a file's version: its size and time of change ("" when absent).
std::string stamp(const std::string& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) return "";
  const auto time = std::filesystem::last_write_time(path, ec);
  return ec ? "" : fmt::format("{}@{}", size, time.time_since_epoch().count());
}

}  // namespace

const ModelSpec& script_model_spec(const ModelOptions& o) {
  // Checked on every call: the specs below are kept by what builds them,
  // which --dropout is not.
  DLSCALE_CHECK(o.dropout < 0,
                "--dropout does not apply to model '{}': a TorchScript module's dropout is its own",
                o.name);
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<ModelSpec>> specs;
  const std::string key =
      fmt::format("{}\n{}\n{}\n{}\n{}\n{}", o.name, o.task_file, o.image_size, o.seq_len,
                  stamp(path_of(o.name)), o.task_file.empty() ? "" : stamp(o.task_file));
  const std::lock_guard<std::mutex> lock(mutex);
  auto& spec = specs[key];
  if (spec == nullptr) {
    auto built = std::make_unique<ModelSpec>(build_spec(o));
    spec = std::move(built);
  }
  return *spec;
}

}  // namespace dlscale::models
