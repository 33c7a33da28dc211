#include "predict/workload.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"
#include "core/files.h"
#include "core/record_keys.h"

namespace dlscale::predict {

int64_t Workload::param_bytes() const {
  int64_t total = 0;
  for (const Gradient& g : grads) total += g.bytes;
  return total;
}

nlohmann::json read_json_file(const std::string& path) {
  const std::string text = read_file(path);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("'{}' is not JSON: {}", path, e.what()));
  }
}

double number_at(const nlohmann::json& record, std::initializer_list<const char*> path,
                 const std::string& what, double hi) {
  const nlohmann::json* node = &record;
  std::string name;
  for (const char* key : path) {
    name += name.empty() ? key : std::string(".") + key;
    if (!node->is_object() || !node->contains(key)) {
      throw Error(fmt::format("{}: no '{}' (a 'dlscale train --json' record is needed)", what, name));
    }
    node = &node->at(key);
  }
  DLSCALE_CHECK(node->is_number() && std::isfinite(node->get<double>()), "{}: '{}' is not a number", what, name);
  DLSCALE_CHECK(node->get<double>() <= hi, "{}: '{}' must be at most {:g} (got {:g})", what, name, hi,
                node->get<double>());
  return node->get<double>();
}

namespace {

// A calibration record's values: a step of up to a day, a batch as train's
// --batch, as many workers, a gradient up to 10 TB. More is not a
// measurement, and would overflow the model's integers or swamp every other
// term.
constexpr double kMaxMs = 864e5;
constexpr double kMaxBatch = 1 << 20;
constexpr double kMaxWorkers = 1 << 20;
constexpr double kMaxTensorBytes = 1e13;

/// Gradients in ready order, each at its share of `backward_s`.
std::vector<Gradient> ready_gradients(const BackwardProfile& profile, double backward_s) {
  std::vector<size_t> order(profile.bytes.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return profile.ready_fraction[a] < profile.ready_fraction[b];
  });
  std::vector<Gradient> grads;
  for (size_t i : order) {
    grads.push_back({profile.bytes[i], profile.ready_fraction[i] * backward_s, static_cast<int64_t>(i)});
  }
  return grads;
}

}  // namespace

BackwardProfile backward_profile_from_record(const nlohmann::json& record, const std::string& what) {
  const auto results = record.find(record::kResults);
  const bool has = results != record.end() && results->is_object() &&
                   results->contains(record::kBackwardProfile) &&
                   results->at(record::kBackwardProfile).is_object();
  DLSCALE_CHECK(has, "{}: no 'results.backward_profile' (record a 1-worker run with 'dlscale train --trace FILE --json "
                "FILE')", what);
  const nlohmann::json& p = results->at(record::kBackwardProfile);
  const double backward_ms = number_at(p, {"backward_ms"}, what + " backward_profile", kMaxMs);
  DLSCALE_CHECK(backward_ms > 0, "{}: 'results.backward_profile.backward_ms' must be > 0", what);
  DLSCALE_CHECK(p.contains(record::kProfileTensors) && p[record::kProfileTensors].is_array() &&
                    !p[record::kProfileTensors].empty(),
                "{}: 'results.backward_profile.tensors' must be a non-empty list", what);
  BackwardProfile profile;
  profile.source = "measured backward (" + what + ")";
  for (const nlohmann::json& t : p[record::kProfileTensors]) {
    const double bytes = number_at(t, {"bytes"}, what + " backward_profile tensor", kMaxTensorBytes);
    const double ready = number_at(t, {"ready_ms"}, what + " backward_profile tensor", kMaxMs);
    DLSCALE_CHECK(bytes > 0 && ready >= 0, "{}: a backward_profile tensor has bytes {} and ready_ms {} (need > 0, >= 0)",
                  what, bytes, ready);
    profile.bytes.push_back(static_cast<int64_t>(bytes));
    profile.ready_fraction.push_back(std::min(1.0, ready / backward_ms));
  }
  return profile;
}

namespace {

/// A finished train record's worker count (record::input::kWorldSize).
double finished_train_workers(const nlohmann::json& record, const std::string& what) {
  DLSCALE_CHECK(record.is_object() && record.value(record::kKind, "") == record::kKindTrain,
                "{}: not a 'dlscale train' record (kind must be 'train')", what);
  DLSCALE_CHECK(record.value(record::kStatus, "") == record::kStatusOk,
                "{}: the run did not finish (status '{}')", what,
                record.value(record::kStatus, ""));
  return number_at(record, {record::kInputs, record::input::kWorldSize}, what, kMaxWorkers);
}

/// The phase times (the record's breakdown) and gradient ready times of a checked record.
Workload workload_from_record(const nlohmann::json& record, const std::string& what) {
  const nlohmann::json& inputs = record[record::kInputs];
  const int64_t accumulate =
      inputs.is_object() ? inputs.value(record::input::kAccumulate, int64_t{1}) : 1;
  DLSCALE_CHECK(
      accumulate == 1,
      "{}: calibration needs a run without --accumulate (this one summed {} micro-batches "
      "per step, and its gradients' ready times are the last one's)",
      what, accumulate);
  Workload w;
  const nlohmann::json& model =
      record.contains(record::kModel) ? record[record::kModel] : nlohmann::json();
  w.model = model.is_object() ? model.value(record::kModelName, "") : "";
  w.unit = model.is_object() ? model.value(record::kModelUnit, "samples") : "samples";
  w.batch = static_cast<int64_t>(
      number_at(record, {record::kInputs, record::input::kBatch}, what, kMaxBatch));
  DLSCALE_CHECK(w.batch >= 1, "{}: inputs.batch must be >= 1", what);
  const auto phase_s = [&](const char* phase) {
    return number_at(record, {record::kResults, record::kBreakdownMs, phase}, what, kMaxMs) / 1e3;
  };
  w.data_s = phase_s("data");
  w.forward_s = phase_s("forward");
  w.backward_s = phase_s("backward");
  w.optimizer_s = phase_s("optimizer");
  DLSCALE_CHECK(w.forward_s > 0 && w.backward_s > 0 && w.optimizer_s >= 0 && w.data_s >= 0,
                "{}: results.breakdown_ms needs forward and backward > 0 (got {} and {} ms)", what, w.forward_s * 1e3,
                w.backward_s * 1e3);
  w.flops_per_sample = model.is_object() ? model.value(record::kModelForwardFlops, 0.0) : 0.0;
  const BackwardProfile profile = backward_profile_from_record(record, what);
  w.grads = ready_gradients(profile, w.backward_s);
  return w;
}

}  // namespace

Workload calibrate_from_record(const nlohmann::json& record, const std::string& what) {
  const double world = finished_train_workers(record, what);
  DLSCALE_CHECK(world == 1, "{}: calibration needs a 1-worker run (this one had {} workers)", what,
                world);
  Workload w = workload_from_record(record, what);
  w.source = fmt::format("measured: {} (1 worker, batch {})", what, w.batch);
  return w;
}

Workload calibrate_busy_from_record(const nlohmann::json& record, const std::string& what) {
  const double world = finished_train_workers(record, what);
  const nlohmann::json& inputs = record[record::kInputs];
  const auto named = inputs.find(record::input::kStrategy);
  const std::string strategy =
      named != inputs.end() && named->is_string() ? named->get<std::string>() : "";
  DLSCALE_CHECK(world == std::floor(world), "{}: inputs.world_size must be a whole number (got {})",
                what, world);
  DLSCALE_CHECK(
      world >= 2 && strategy == "independent",
      "{}: a busy calibration needs a run of one worker a core with --strategy independent "
      "(this one had {} worker(s), strategy '{}')",
      what, world, strategy);
  Workload w = workload_from_record(record, what);
  w.source = fmt::format("measured with every core busy: {} ({} independent workers, batch {})",
                         what, world, w.batch);
  w.side_by_side = static_cast<int64_t>(world);
  return w;
}

Workload calibrate_from_rate(const std::string& model, int64_t batch, double samples_per_s,
                             const BackwardProfile& profile, double backward_share) {
  DLSCALE_CHECK(batch >= 1, "the published figure's batch must be >= 1 (got {})", batch);
  DLSCALE_CHECK(samples_per_s > 0 && std::isfinite(samples_per_s),
                "the published samples/s must be a number > 0 (got {})", samples_per_s);
  DLSCALE_CHECK(!profile.bytes.empty(), "model '{}' has no parameters to exchange", model);
  Workload w;
  w.model = model;
  w.batch = batch;
  const double step = static_cast<double>(batch) / samples_per_s;
  w.backward_s = step * backward_share;
  w.forward_s = step - w.backward_s;
  w.grads = ready_gradients(profile, w.backward_s);
  w.source = fmt::format("published: {:g} samples/s at batch {} on one device; backward split: {}", samples_per_s,
                         batch, profile.source);
  return w;
}

}  // namespace dlscale::predict
