#include "models/task_file.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "core/error.h"
#include "core/files.h"
#include "core/text.h"

namespace dlscale::models {

namespace {

constexpr int64_t kMaxDim = int64_t{1} << 24;             // one dimension of a sample's tensor
constexpr int64_t kMaxSampleElements = int64_t{1} << 26;  // a sample's tensor: 256 MiB of float32
constexpr int64_t kMaxId = int64_t{1} << 31;
constexpr int64_t kMaxSeqLen = 65536;  // as --seq-len
constexpr size_t kMaxInputs = 8;
constexpr size_t kMaxRank = 5;
constexpr size_t kMaxFileBytes = size_t{1} << 20;

std::string where(const std::string& path, const YAML::Node& node) {
  const YAML::Mark m = node.Mark();
  return m.line >= 0 ? fmt::format("{}:{}", path, m.line + 1) : path;
}

std::string text_of(const YAML::Node& node, const std::string& path, const std::string& key) {
  DLSCALE_CHECK(node.IsScalar(), "{}: '{}' must be text", where(path, node), key);
  const std::string s = node.Scalar();
  DLSCALE_CHECK(!has_control(s) && is_utf8(s), "{}: '{}' holds a control character or is not UTF-8",
                where(path, node), key);
  return s;
}

/// A whole number in [low, high].
int64_t integer_of(const YAML::Node& node, const std::string& path, const std::string& key,
                   int64_t low, int64_t high) {
  const std::string s = text_of(node, path, key);
  size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  DLSCALE_CHECK(used == s.size() && !s.empty(), "{}: '{}' must be a whole number (got '{}')",
                where(path, node), key, printable(s));
  DLSCALE_CHECK(v >= low && v <= high, "{}: '{}' must be in [{}, {}] (got {})", where(path, node),
                key, low, high, v);
  return v;
}

double number_of(const YAML::Node& node, const std::string& path, const std::string& key,
                 double low, double high) {
  const std::string s = text_of(node, path, key);
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  DLSCALE_CHECK(used == s.size() && !s.empty() && std::isfinite(v),
                "{}: '{}' must be a number (got '{}')", where(path, node), key, printable(s));
  DLSCALE_CHECK(v >= low && v < high, "{}: '{}' must be in [{}, {}) (got {})", where(path, node),
                key, low, high, v);
  return v;
}

/// A name of a tensor, a task or a unit: 1 to 64 letters, digits, '_' or '-'.
std::string name_of(const YAML::Node& node, const std::string& path, const std::string& key) {
  const std::string s = text_of(node, path, key);
  const bool ok = !s.empty() && s.size() <= 64 && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
  });
  DLSCALE_CHECK(ok, "{}: '{}' must be 1 to 64 letters, digits, '_' or '-' (got '{}')",
                where(path, node), key, printable(s));
  return s;
}

/// Calls `each(key, value)` for every key of `node`, refusing keys not in
/// `known` and keys given twice.
template <typename Each>
void for_keys(const YAML::Node& node, const std::string& path, const std::string& what,
              const std::vector<std::string>& known, Each&& each) {
  DLSCALE_CHECK(node.IsMap(), "{}: {} must be a mapping of {}", where(path, node), what,
                join(known, ", "));
  std::set<std::string> seen;
  for (const auto& kv : node) {
    const std::string key = text_of(kv.first, path, "key");
    DLSCALE_CHECK(std::find(known.begin(), known.end(), key) != known.end(),
                  "{}: unknown key '{}' in {}; known: {}", where(path, kv.first), printable(key),
                  what, join(known, ", "));
    DLSCALE_CHECK(seen.insert(key).second, "{}: '{}' appears twice in {}", where(path, kv.first),
                  key, what);
    each(key, kv.second);
  }
}

TensorDecl tensor_of(const YAML::Node& node, const std::string& path, const std::string& what) {
  TensorDecl t;
  bool named = false;
  for_keys(node, path, what, {"name", "dtype", "shape", "low", "high"},
           [&](const std::string& key, const YAML::Node& v) {
             if (key == "name") {
               t.name = name_of(v, path, "name");
               named = true;
             } else if (key == "dtype") {
               t.dtype = text_of(v, path, "dtype");
               DLSCALE_CHECK(t.dtype == "float32" || t.dtype == "float64" || t.dtype == "int64" ||
                                 t.dtype == "int32",
                             "{}: dtype must be float32, float64, int64 or int32 (got '{}')",
                             where(path, v), printable(t.dtype));
             } else if (key == "shape") {
               DLSCALE_CHECK(v.IsSequence() && v.size() <= kMaxRank,
                             "{}: shape must be a list of at most {} sizes, e.g. [3, 32, 32]",
                             where(path, v), kMaxRank);
               int64_t elements = 1;
               for (const auto& d : v) {
                 t.shape.push_back(integer_of(d, path, "shape", 1, kMaxDim));
                 elements *= t.shape.back();
                 DLSCALE_CHECK(elements <= kMaxSampleElements,
                               "{}: a sample's '{}' would hold over {} elements", where(path, v),
                               t.name, kMaxSampleElements);
               }
             } else if (key == "low") {
               t.low = integer_of(v, path, "low", -kMaxId, kMaxId);
             } else {
               t.high = integer_of(v, path, "high", -kMaxId, kMaxId);
             }
           });
  DLSCALE_CHECK(named, "{}: {} needs a 'name'", where(path, node), what);
  const bool integer = t.dtype == "int64" || t.dtype == "int32";
  DLSCALE_CHECK(
      !integer || t.high > t.low,
      "{}: integer tensor '{}' needs 'high' > 'low' (its values are drawn from [low, high))",
      where(path, node), t.name);
  DLSCALE_CHECK(integer || (t.low == 0 && t.high == 0),
                "{}: 'low' and 'high' apply to integer tensors; '{}' is {}", where(path, node),
                t.name, t.dtype);
  return t;
}

LossKind loss_of(const YAML::Node& node, const std::string& path) {
  const std::string s = text_of(node, path, "loss");
  for (const LossKind k : {LossKind::kCrossEntropy, LossKind::kBceWithLogits, LossKind::kMse}) {
    if (s == loss_name(k)) return k;
  }
  throw Error(fmt::format("{}: loss must be cross-entropy, bce-with-logits or mse (got '{}')",
                          where(path, node), printable(s)));
}

/// Checks what the keys cannot check alone: the target fits the loss, the
/// metrics come from it, names differ.
void check_declared(const TaskDecl& d, const std::string& path) {
  DLSCALE_CHECK(!d.inputs.empty(),
                "{}: a declared task needs 'inputs' (or 'task: image-classification')", path);
  DLSCALE_CHECK(!d.target.name.empty(), "{}: a declared task needs a 'target'", path);
  std::set<std::string> names;
  for (const auto& t : d.inputs)
    DLSCALE_CHECK(names.insert(t.name).second, "{}: input '{}' is declared twice", path, t.name);
  DLSCALE_CHECK(names.count(d.target.name) == 0, "{}: the target '{}' has an input's name", path,
                d.target.name);
  const bool integer = d.target.dtype == "int64" || d.target.dtype == "int32";
  if (d.loss == LossKind::kCrossEntropy) {
    DLSCALE_CHECK(d.target.dtype == "int64" && d.target.low == 0 && d.target.high >= 2,
                  "{}: a cross-entropy target is int64 classes in [0, high) with low 0 and high >= "
                  "2 (target '{}')",
                  path, d.target.name);
  } else {
    DLSCALE_CHECK(!integer, "{}: a {} target is float32 or float64 (target '{}' is {})", path,
                  loss_name(d.loss), d.target.name, d.target.dtype);
  }
  const std::string allowed = metrics_of(d.loss);
  for (const auto& m : d.metrics) {
    DLSCALE_CHECK((" " + allowed + " ").find(" " + m + " ") != std::string::npos,
                  "{}: metric '{}' does not come with loss {}; it gives: {}", path, m,
                  loss_name(d.loss), allowed);
  }
  DLSCALE_CHECK(d.loss == LossKind::kCrossEntropy || d.label_smoothing == 0,
                "{}: label_smoothing applies to cross-entropy only", path);
}

/// The keys each kind of task file takes besides task and name.
const std::map<std::string, std::vector<std::string>> kTaskKeys = {
    {"image-classification", {"channels", "image_size"}},
    {"translation", {"seq_len", "label_smoothing"}},
    {"recommendation", {"users", "items"}},
    {"declared",
     {"inputs", "target", "loss", "label_smoothing", "metrics", "unit", "items_per_sample"}},
};

/// Reads one key of a task file other than task and name into `d`.
void parse_key(TaskDecl& d, const std::string& key, const YAML::Node& v, const std::string& path) {
  if (key == "channels") {
    d.channels = integer_of(v, path, "channels", 1, 64);
  } else if (key == "image_size") {
    d.image_size = integer_of(v, path, "image_size", 1, 4096);
  } else if (key == "seq_len") {
    d.seq_len = integer_of(v, path, "seq_len", 1, kMaxSeqLen);
  } else if (key == "users" || key == "items") {
    // recommendation's synthetic data plants 16 taste groups among them.
    (key == "users" ? d.users : d.items) = integer_of(v, path, key, 16, kMaxId);
  } else if (key == "inputs") {
    DLSCALE_CHECK(v.IsSequence() && v.size() >= 1 && v.size() <= kMaxInputs,
                  "{}: inputs must be a list of 1 to {} tensors", where(path, v), kMaxInputs);
    for (const auto& t : v) d.inputs.push_back(tensor_of(t, path, "an input"));
  } else if (key == "target") {
    d.target = tensor_of(v, path, "the target");
  } else if (key == "loss") {
    d.loss = loss_of(v, path);
  } else if (key == "label_smoothing") {
    d.label_smoothing = number_of(v, path, "label_smoothing", 0, 1);
  } else if (key == "metrics") {
    DLSCALE_CHECK(v.IsSequence() && v.size() <= 4, "{}: metrics must be a list, e.g. [top1, top5]",
                  where(path, v));
    for (const auto& m : v) d.metrics.push_back(name_of(m, path, "metrics"));
  } else if (key == "unit") {
    d.unit = name_of(v, path, "unit");
  } else {
    d.items_per_sample = integer_of(v, path, "items_per_sample", 1, kMaxId);
  }
}

}  // namespace

std::string loss_name(LossKind loss) {
  switch (loss) {
    case LossKind::kCrossEntropy:
      return "cross-entropy";
    case LossKind::kBceWithLogits:
      return "bce-with-logits";
    case LossKind::kMse:
      return "mse";
  }
  return "";
}

std::string metrics_of(LossKind loss) {
  switch (loss) {
    case LossKind::kCrossEntropy:
      return "top1 top5";
    case LossKind::kBceWithLogits:
      return "accuracy";
    case LossKind::kMse:
      return "mse";
  }
  return "";
}

TaskDecl parse_task_file(const std::string& text, const std::string& path) {
  DLSCALE_CHECK(is_utf8(text), "{}: a task file is UTF-8 text", path);
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw Error(fmt::format("{}:{}: not valid YAML: {}", path, e.mark.line + 1, e.msg));
  }
  TaskDecl d;
  std::vector<std::string> keys = {"task", "name"};
  for (const auto& [task, own] : kTaskKeys) keys.insert(keys.end(), own.begin(), own.end());
  std::sort(keys.begin() + 2, keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  for_keys(root, path, "a task file", keys, [&](const std::string& key, const YAML::Node& v) {
    if (key == "task") {
      d.builtin = text_of(v, path, "task");
      DLSCALE_CHECK(d.builtin != "declared" && kTaskKeys.count(d.builtin) == 1,
                    "{}: the built-in tasks a TorchScript module can take: image-classification, "
                    "translation, recommendation (got '{}'); declare any other with inputs, "
                    "target, loss and metrics",
                    where(path, v), printable(d.builtin));
    } else if (key == "name") {
      d.name = name_of(v, path, "name");
    } else {
      parse_key(d, key, v, path);
    }
  });
  const std::string task = d.builtin.empty() ? "declared" : d.builtin;
  const std::vector<std::string>& own = kTaskKeys.at(task);
  for (const auto& kv : root) {
    const std::string key = kv.first.Scalar();
    DLSCALE_CHECK(
        key == "task" || key == "name" || std::find(own.begin(), own.end(), key) != own.end(),
        "{}: '{}' does not go with {}; it takes: {}", where(path, kv.first), key,
        d.builtin.empty() ? "a declared task" : "'task: " + d.builtin + "'", join(own, ", "));
  }
  if (d.builtin.empty()) {
    check_declared(d, path);
    return d;
  }
  d.name = d.builtin;
  DLSCALE_CHECK(d.channels * d.image_size * d.image_size <= kMaxSampleElements,
                "{}: an image of {} x {} x {} would hold over {} elements", path, d.channels,
                d.image_size, d.image_size, kMaxSampleElements);
  DLSCALE_CHECK(d.builtin != "recommendation" || (d.users > 0 && d.items > 0),
                "{}: 'task: recommendation' needs 'users' and 'items' (the ID ranges the module's "
                "embeddings hold)",
                path);
  return d;
}

TaskDecl read_task_file(const std::string& path) {
  const std::string kind = special_file_kind(path);
  DLSCALE_CHECK(kind.empty(), "task file '{}' is {}, not a file", path, kind);
  check_readable(path);
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  DLSCALE_CHECK(ec || size <= kMaxFileBytes,
                "task file '{}' is over {} bytes; a task file is a few lines", path, kMaxFileBytes);
  return parse_task_file(read_file(path), path);
}

}  // namespace dlscale::models
