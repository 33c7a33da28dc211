#include "train/checkpoint_meta.h"

#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/hash.h"

namespace dlscale::train {

namespace {

constexpr size_t kMagicSize = sizeof(kCheckpointMagic) - 1;
constexpr const char* kSchema = "dlscale.checkpoint/1";
// Beyond these a value was not written by dlscale (docs/errors.md, "Limits").
constexpr int64_t kMaxCheckpointSteps = 1000000000;
constexpr int64_t kMaxCount = int64_t{1} << 30;

void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t get_u64(const std::string& in, size_t at) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(in[at + i]);
  return v;
}

/// Reads the fields of one JSON object of a checkpoint, each checked for its
/// type and range; the first bad one is named in the error.
class FieldReader {
 public:
  FieldReader(const nlohmann::json& object, const std::string& file, std::string prefix)
      : object_(object), file_(file), prefix_(std::move(prefix)) {
    if (!object_.is_object()) damaged("", "is not an object");
  }

  [[noreturn]] void damaged(const std::string& key, const std::string& why) const {
    const std::string field = prefix_.empty() ? key : key.empty() ? prefix_ : prefix_ + "." + key;
    throw Error(fmt::format("checkpoint {} is damaged: {}{}", file_,
                            field.empty() ? "metadata" : "'" + field + "'", " " + why));
  }

  const nlohmann::json& at(const char* key) const {
    const auto it = object_.find(key);
    if (it == object_.end()) damaged(key, "is missing");
    return *it;
  }

  std::string text(const char* key, bool allow_empty = false) const {
    const nlohmann::json& v = at(key);
    if (!v.is_string()) damaged(key, "is not text");
    if (!allow_empty && v.get_ref<const std::string&>().empty()) damaged(key, "is empty");
    return v.get<std::string>();
  }

  int64_t integer(const char* key, int64_t lo, int64_t hi) const {
    const nlohmann::json& v = at(key);
    if (!v.is_number_integer()) damaged(key, "is not an integer");
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi)) {
      damaged(key, fmt::format("is {}, expected {} .. {}", v.get<uint64_t>(), lo, hi));
    }
    const auto x = v.get<int64_t>();
    if (x < lo || x > hi) damaged(key, fmt::format("is {}, expected {} .. {}", x, lo, hi));
    return x;
  }

  uint64_t unsigned_integer(const char* key) const {
    const nlohmann::json& v = at(key);
    if (!v.is_number_unsigned()) damaged(key, "is not a non-negative integer");
    return v.get<uint64_t>();
  }

  double real(const char* key, double lo, double hi) const {
    const nlohmann::json& v = at(key);
    if (!v.is_number()) damaged(key, "is not a number");
    const auto x = v.get<double>();
    if (!std::isfinite(x) || x < lo || x > hi) {
      damaged(key, fmt::format("is {}, expected {:g} .. {:g}", x, lo, hi));
    }
    return x;
  }

  bool boolean(const char* key) const {
    const nlohmann::json& v = at(key);
    if (!v.is_boolean()) damaged(key, "is not true or false");
    return v.get<bool>();
  }

  const nlohmann::json& array(const char* key) const {
    const nlohmann::json& v = at(key);
    if (!v.is_array()) damaged(key, "is not a list");
    return v;
  }

 private:
  const nlohmann::json& object_;
  const std::string& file_;
  std::string prefix_;
};

EvalRecord read_eval(const nlohmann::json& j, const std::string& file, size_t index, int64_t steps,
                     const std::vector<MetricSpec>& metrics) {
  const FieldReader f(j, file, fmt::format("evals[{}]", index));
  EvalRecord e;
  e.step = f.integer("step", 0, steps);
  e.epoch = f.real("epoch", 0, 1e12);
  for (const MetricSpec& m : metrics) {
    e.metrics.emplace_back(m.name, m.percent ? f.real(m.name.c_str(), 0, 1) : f.real(m.name.c_str(), -1e300, 1e300));
  }
  e.samples = f.integer("samples", 0, std::numeric_limits<int64_t>::max());
  e.seconds = f.real("seconds", 0, 1e12);
  e.run_seconds = f.real("run_seconds", 0, 1e12);
  return e;
}

/// The "metrics" list: name, label and how each is shown and compared.
std::vector<MetricSpec> read_metrics(const nlohmann::json& list, const std::string& file) {
  std::vector<MetricSpec> out;
  for (size_t i = 0; i < list.size(); ++i) {
    const FieldReader f(list[i], file, fmt::format("metrics[{}]", i));
    MetricSpec m;
    m.name = f.text("name");
    if (is_eval_field(m.name)) f.damaged("name", fmt::format("'{}' is a field of every evaluation", m.name));
    m.label = f.text("label");
    m.percent = f.boolean("percent");
    m.higher_is_better = f.boolean("higher_is_better");
    out.push_back(m);
  }
  return out;
}

std::vector<std::pair<int64_t, double>> read_lr_curve(const FieldReader& f, const nlohmann::json& curve,
                                                      int64_t next_step) {
  std::vector<std::pair<int64_t, double>> out;
  for (const nlohmann::json& point : curve) {
    const bool pair = point.is_array() && point.size() == 2 && point[0].is_number_integer() &&
                      point[1].is_number();
    if (!pair) f.damaged("lr_curve", "holds an entry that is not a [step, rate] pair");
    const auto step = point[0].get<int64_t>();
    const auto rate = point[1].get<double>();
    const int64_t after = out.empty() ? next_step : out.back().first + 1;
    if (step < after || step > kMaxCheckpointSteps) {
      f.damaged("lr_curve", fmt::format("has step {} out of order (expected >= {})", step, after));
    }
    if (!std::isfinite(rate) || rate < 0) {
      f.damaged("lr_curve", fmt::format("has rate {} at step {}", rate, step));
    }
    out.emplace_back(step, rate);
  }
  return out;
}

}  // namespace

std::string frame_checkpoint(const std::vector<std::string>& sections) {
  std::string out(kCheckpointMagic, kMagicSize);
  for (const std::string& part : sections) {
    put_u64(out, part.size());
    out += part;
  }
  put_u64(out, fnv1a(out.data(), out.size()));
  return out;
}

std::vector<std::string> checkpoint_sections(const std::string& bytes, const std::string& name) {
  DLSCALE_CHECK(bytes.size() >= kMagicSize + 8 && bytes.compare(0, kMagicSize, kCheckpointMagic) == 0,
                "{} is not a dlscale checkpoint (no 'DLSCALE-CHECKPOINT 1' header)", name);
  const size_t body = bytes.size() - 8;
  DLSCALE_CHECK(fnv1a(bytes.data(), body) == get_u64(bytes, body),
                "checkpoint {} is damaged (checksum mismatch): it was truncated or altered", name);
  std::vector<std::string> parts;
  size_t at = kMagicSize;
  for (int i = 0; i < kCheckpointSections; ++i) {
    DLSCALE_CHECK(at + 8 <= body, "checkpoint {} is damaged (section {} missing)", name, i);
    const uint64_t n = get_u64(bytes, at);
    at += 8;
    DLSCALE_CHECK(n <= body - at, "checkpoint {} is damaged (section {} overruns the file)", name,
                  i);
    parts.push_back(bytes.substr(at, n));
    at += n;
  }
  DLSCALE_CHECK(at == body, "checkpoint {} is damaged (trailing bytes)", name);
  return parts;
}

nlohmann::json to_json(const CheckpointMeta& m) {
  nlohmann::json evals = nlohmann::json::array();
  for (const EvalRecord& e : m.evals) evals.push_back(to_json(e));
  nlohmann::json curve = nlohmann::json::array();
  for (const auto& [step, rate] : m.lr_curve) curve.push_back({step, rate});
  nlohmann::json j = {{"schema", kSchema},
                      {"model", m.model},
                      {"world_size", m.world_size},
                      {"global_batch", m.global_batch},
                      {"optimizer", m.optimizer},
                      {"parameters", m.parameters},
                      {"buffers", m.buffers},
                      {"seed", m.seed},
                      {"data", m.data},
                      {"next_step", m.next_step},
                      {"steps", m.steps},
                      {"run_seconds", m.run_seconds},
                      {"lr_curve", curve},
                      {"evals", evals}};
  if (!m.metrics.empty()) {
    j["metrics"] = nlohmann::json::array();
    for (const MetricSpec& x : m.metrics) {
      j["metrics"].push_back(
          {{"name", x.name}, {"label", x.label}, {"percent", x.percent}, {"higher_is_better", x.higher_is_better}});
    }
  }
  return j;
}

CheckpointMeta parse_checkpoint_meta(const nlohmann::json& meta, const std::string& name) {
  const FieldReader f(meta, name, "");
  if (f.text("schema") != kSchema) f.damaged("schema", fmt::format("is not '{}'", kSchema));
  CheckpointMeta m;
  m.model = f.text("model");
  m.world_size = static_cast<int>(f.integer("world_size", 1, 1 << 20));
  m.global_batch = f.integer("global_batch", 1, kMaxCount);
  m.optimizer = f.text("optimizer");
  m.parameters = f.integer("parameters", 0, kMaxCount);
  m.buffers = f.integer("buffers", 0, kMaxCount);
  m.seed = f.unsigned_integer("seed");
  m.data = f.text("data");
  m.steps = f.integer("steps", 1, kMaxCheckpointSteps);
  m.next_step = f.integer("next_step", 0, m.steps);
  m.run_seconds = f.real("run_seconds", 0, 1e12);
  // Written by every dlscale since checkpoints kept the rate curve; older
  // files lack it and are checked without it.
  if (meta.contains("lr_curve")) m.lr_curve = read_lr_curve(f, f.array("lr_curve"), m.next_step);
  if (meta.contains("metrics")) m.metrics = read_metrics(f.array("metrics"), name);
  // Checkpoints from before tasks named their metrics are image classification's.
  const std::vector<MetricSpec> metrics =
      meta.contains("metrics") ? m.metrics
                               : std::vector<MetricSpec>{{"top1", "top-1", true, true}, {"top5", "top-5", true, true}};
  const nlohmann::json& evals = f.array("evals");
  for (size_t i = 0; i < evals.size(); ++i) m.evals.push_back(read_eval(evals[i], name, i, m.steps, metrics));
  return m;
}

}  // namespace dlscale::train
