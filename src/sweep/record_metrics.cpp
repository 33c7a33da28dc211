#include "sweep/record_metrics.h"

#include <algorithm>
#include <fmt/format.h>

#include "core/error.h"
#include "core/record_keys.h"

namespace dlscale::sweep {

namespace {

/// A commbench record's rows and fits as metrics: "busbw_gbps/allreduce/1048576",
/// "alpha_us/allreduce", ...; plus the peak busbw over every row.
std::map<std::string, double> commbench_metrics(const nlohmann::json& j) {
  std::map<std::string, double> m;
  using namespace record;
  DLSCALE_CHECK(j.value(kSchema, "") == kCommbenchSchema && j.contains(kResults),
                "the run's JSON record is not a dlscale commbench record");
  const nlohmann::json& r = j[kResults];
  double peak = 0;
  const nlohmann::json rows = r.value(kRows, nlohmann::json::array());
  const nlohmann::json fits = r.value(kFits, nlohmann::json::object());
  for (const auto& row : rows) {
    const std::string at = fmt::format("{}/{}", row.value(kRowOp, "?"), row.value(kRowBytes, 0ll));
    for (const char* k : {kRowTimeUs, kCommAlgbwGbps, kCommBusbwGbps}) {
      if (row.contains(k) && row[k].is_number()) m[fmt::format("{}/{}", k, at)] = row[k].get<double>();
    }
    peak = std::max(peak, row.value(kCommBusbwGbps, 0.0));
  }
  for (const auto& [op, fit] : fits.items()) {
    m[std::string(kFitAlphaUs) + "/" + op] = fit.value(kFitAlphaUs, 0.0);
    m[std::string(kFitBandwidthGbps) + "/" + op] = fit.value(kFitBandwidthGbps, 0.0);
  }
  m[kWrong] = r.value(kWrong, 0.0);
  DLSCALE_CHECK(m[kWrong] == 0, "commbench found {} wrong element(s)", m[kWrong]);
  m[metric::kBusbwPeak] = peak;
  return m;
}

}  // namespace

namespace {

using Metrics = std::map<std::string, double>;

void take(Metrics& m, const std::string& name, const nlohmann::json& v) {
  if (v.is_number()) m[name] = v.get<double>();
}

/// An external command's samples/s: the last match of its throughput pattern.
Metrics external_metrics(const Params& p, const std::string& log_text, double global_batch) {
  const std::string pattern = param_text(p, "throughput-pattern", kDefaultThroughputPattern);
  const std::string last = last_throughput_match(pattern, log_text);
  DLSCALE_CHECK(!last.empty(), "no line of the output matches the throughput pattern '{}'", pattern);
  double sps = 0;
  try {
    sps = std::stod(last);
  } catch (const std::exception&) {
    throw Error(fmt::format("the throughput pattern matched '{}', which is not a number", last));
  }
  DLSCALE_CHECK(sps > 0, "the throughput pattern matched '{}'; samples/s must be > 0", last);
  return {{record::metric::kSamplesPerSec, sps}, {record::metric::kStepTimeMs, 1000.0 * global_batch / sps}};
}

/// results.comm: traffic, bandwidth, the most any rank sent, and whether
/// the replicas ended identical.
void comm_metrics(Metrics& m, const nlohmann::json& c) {
  using namespace record;
  const std::string prefix = metric::kCommPrefix;
  for (const char* k : {kCommBytesPerStep, kCommBusyMsP50, kCommAlgbwGbps, kCommBusbwGbps}) {
    if (c.contains(k)) take(m, prefix + k, c[k]);
  }
  // Max over ranks of the bytes each sent per step (formula, TCP counters).
  for (const char* k : {kCommBytesSentFormula, kCommBytesSentTcp}) {
    if (!c.contains(k) || !c[k].is_array()) continue;
    const std::string name = prefix + k;
    for (const auto& v : c[k]) {
      if (v.is_number()) m[name] = std::max(m.count(name) ? m[name] : 0.0, v.get<double>());
    }
  }
  if (c.contains(kCommReplicasIdentical) && c[kCommReplicasIdentical].is_boolean()) {
    m[prefix + kCommReplicasIdentical] = c[kCommReplicasIdentical].get<bool>() ? 1.0 : 0.0;
  }
}

/// Convergence: time to accuracy, epochs, final accuracy; conv_success is 1
/// when the target was reached, 0 when the run was aborted.
void convergence_metrics(Metrics& m, const nlohmann::json& c) {
  using namespace record;
  for (const auto& [k, v] : c.items()) take(m, metric::kConvergencePrefix + k, v);
  const auto status = c.find(kConvergenceStatus);
  if (status != c.end() && status->is_string() && !status->get<std::string>().empty()) {
    m[metric::kConvergenceSuccess] = *status == kStatusSuccess ? 1.0 : 0.0;
  }
}

/// results.noise beyond its own numbers: Adam's B_simple, and the estimate
/// at the final weights (--noise-final) with Adam's there.
void noise_metrics(Metrics& m, const nlohmann::json& noise) {
  using namespace record;
  auto adam_of = [&m](const nlohmann::json& section, const char* name) {
    const auto adam = section.find("preconditioned");
    if (adam != section.end() && adam->is_object() && adam->contains("b_simple"))
      take(m, name, (*adam)["b_simple"]);
  };
  adam_of(noise, metric::kNoiseAdamBSimple);
  const auto final = noise.find("final");
  if (final == noise.end() || !final->is_object()) return;
  for (const auto& [k, v] : final->items()) take(m, std::string("noise_final_") + k, v);
  adam_of(*final, metric::kNoiseFinalAdamBSimple);
}

Metrics train_metrics(const nlohmann::json& r, double global_batch) {
  using namespace record;
  Metrics m;
  for (const char* k : {kSamplesPerSec, kItemsPerSec, kSamplesPerSecJitter, kSamplesPerSecUncertainty,
                        kStepTimeMeanMs, kStepTimeP50Ms, kStepTimeP95Ms, kWallSeconds, kEstTrainGflopsPerSec}) {
    if (r.contains(k)) take(m, k, r[k]);
  }
  DLSCALE_CHECK(m.count(kSamplesPerSec) && m[kSamplesPerSec] > 0, "the run's JSON record has no samples_per_sec");
  m[metric::kStepTimeMs] = 1000.0 * global_batch / m[kSamplesPerSec];
  for (const auto& [key, section] : r.items()) {
    if (key == kBreakdownMs) {
      for (const auto& [phase, v] : section.items()) take(m, metric::breakdown_ms(phase), v);
    } else if (key == kComm && section.is_object()) {
      comm_metrics(m, section);
    } else if (key == kConvergence && section.is_object()) {
      convergence_metrics(m, section);
    } else if (section.is_object()) {
      // The input pipeline (data_*) and a strategy's own section, e.g. the
      // parameter server's busiest shard and staleness (ps_*; docs/metrics.md).
      for (const auto& [k, v] : section.items()) take(m, key + "_" + k, v);
      if (key == kNoise) noise_metrics(m, section);
    }
  }
  return m;
}

}  // namespace

std::map<std::string, double> extract_metrics(const Params& p, const std::string& record_json,
                                              const std::string& log_text) {
  const std::string kind = param_text(p, "kind");
  const double global_batch = kind == "commbench" ? 0.0 : static_cast<double>(param_int(p, "global-batch"));
  if (kind == "external") return external_metrics(p, log_text, global_batch);
  const nlohmann::json j = nlohmann::json::parse(record_json, nullptr, false);
  DLSCALE_CHECK(!j.is_discarded() && j.contains(record::kResults), "the run's JSON record is missing or not valid JSON");
  if (kind == "commbench") return commbench_metrics(j);
  return train_metrics(j[record::kResults], global_batch);
}

/// What a dlscale record says about the software and machine it ran on.
void add_program_versions(const std::string& record, nlohmann::json& versions) {
  const nlohmann::json j = nlohmann::json::parse(record, nullptr, false);
  if (j.is_discarded() || !j.contains("environment") || !j["environment"].is_object()) return;
  for (const char* k : {"torch_version", "blas", "compiler", "cpu_model", "os", "git_revision"}) {
    if (j["environment"].contains(k)) versions[k] = j["environment"][k];
  }
}

}  // namespace dlscale::sweep
