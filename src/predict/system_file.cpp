#include "predict/system_file.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include "core/error.h"
#include "core/files.h"
#include "core/record_keys.h"
#include "predict/predictor.h"
#include "predict/workload.h"

namespace dlscale::predict {
namespace {

struct Range {
  double lo;
  double hi;
};

constexpr double kGbit = 1e9 / 8;  // bytes/s in one Gbit/s

// What a system file (and the same flags of `predict`) may say: wide enough
// for any machine, narrow enough that no value overflows the model or its
// integers (docs/predict.md, "System files").
constexpr Range kGbitS{1e-6, 1e6};           // up to 1 Pbit/s
constexpr Range kGbyteS{1e-6, 1.25e5};       // the same in GB/s
constexpr Range kLatencyUs{0, 1e6};          // up to 1 s a message
constexpr Range kWorkersPerNode{1, 1024};    // as train's --workers
constexpr Range kCopyGbyteS{0, 1e5};
constexpr Range kCores{0, 1 << 20};
constexpr Range kThreads{1, 4096};
constexpr Range kBucketMb{0, 1 << 20};
constexpr Range kBatch{1, 1 << 20};          // as train's --batch
constexpr Range kRate{1e-9, 1e12};           // samples/s
constexpr Range kWorkers{1, 1e8};            // as predict's --workers
constexpr Range kEfficiencyPct{1e-9, 1000};
constexpr Range kGroupNodes{1, 1e8};  // nodes under one uplink
constexpr Range kOversubscription{1e-3, 1e6};

std::string at(const std::string& what, const YAML::Node& node) {
  return fmt::format("{} line {}", what, node.Mark().line + 1);
}

void check_keys(const YAML::Node& map, const std::set<std::string>& allowed, const std::string& what,
                const std::string& section) {
  DLSCALE_CHECK(map.IsMap(), "{}: {} must be a mapping", at(what, map), section);
  for (const auto& kv : map) {
    const std::string key = kv.first.as<std::string>();
    if (allowed.count(key) == 0) {
      throw Error(fmt::format("{}: unknown key '{}' in {}; allowed: {}", at(what, kv.first), key, section,
                              fmt::join(allowed, ", ")));
    }
  }
}

double number(const YAML::Node& node, const std::string& what, const std::string& key, Range r) {
  double v = 0;
  try {
    v = node.as<double>();
  } catch (const YAML::Exception&) {
    throw Error(fmt::format("{}: '{}' must be a number", at(what, node), key));
  }
  DLSCALE_CHECK(std::isfinite(v) && v >= r.lo && v <= r.hi, "{}: '{}' must be in [{:g}, {:g}] (got {})",
                at(what, node), key, r.lo, r.hi, node.Scalar());
  return v;
}

std::string text(const YAML::Node& node, const std::string& what, const std::string& key) {
  DLSCALE_CHECK(node.IsScalar(), "{}: '{}' must be text", at(what, node), key);
  return node.as<std::string>();
}

/// {gbit_s, gbyte_s, latency_us}: exactly one bandwidth.
Link parse_link(const YAML::Node& node, const std::string& what, const std::string& key) {
  check_keys(node, {"gbit_s", "gbyte_s", "latency_us"}, what, key);
  DLSCALE_CHECK(node["gbit_s"].IsDefined() != node["gbyte_s"].IsDefined(),
                "{}: '{}' needs one bandwidth: gbit_s or gbyte_s", at(what, node), key);
  Link l;
  l.bytes_per_s = node["gbit_s"] ? number(node["gbit_s"], what, key + ".gbit_s", kGbitS) * kGbit
                                 : number(node["gbyte_s"], what, key + ".gbyte_s", kGbyteS) * 1e9;
  l.alpha_s = node["latency_us"] ? number(node["latency_us"], what, key + ".latency_us", kLatencyUs) * 1e-6 : 0;
  return l;
}

template <typename T>
std::vector<T> list(const YAML::Node& node, const std::string& what, const std::string& key, Range r) {
  DLSCALE_CHECK(node.IsSequence() && node.size() > 0, "{}: '{}' must be a non-empty list", at(what, node), key);
  std::vector<T> out;
  for (const YAML::Node& item : node) out.push_back(static_cast<T>(number(item, what, key, r)));
  return out;
}

/// {nodes_per_group, uplink_gbit_s | oversubscription}.
void parse_fabric(const YAML::Node& node, const std::string& what, SystemSpec& s) {
  check_keys(node, {"nodes_per_group", "uplink_gbit_s", "oversubscription"}, what, "fabric");
  DLSCALE_CHECK(node["nodes_per_group"] &&
                    node["uplink_gbit_s"].IsDefined() != node["oversubscription"].IsDefined(),
                "{}: 'fabric' needs nodes_per_group and one of uplink_gbit_s or oversubscription",
                at(what, node));
  s.network.fabric.nodes_per_group = static_cast<long long>(
      number(node["nodes_per_group"], what, "fabric.nodes_per_group", kGroupNodes));
  if (node["uplink_gbit_s"]) {
    s.network.fabric.bytes_per_s =
        number(node["uplink_gbit_s"], what, "fabric.uplink_gbit_s", kGbitS) * kGbit;
  } else {
    s.fabric_oversubscription =
        number(node["oversubscription"], what, "fabric.oversubscription", kOversubscription);
  }
}

/// `cast_gbyte_s`: one rate for every 16-bit type, or one per type
/// ({fp16: X, bf16: Y}; a type left out costs nothing to cast).
void parse_cast(const YAML::Node& node, const std::string& what, Network& n) {
  if (!node.IsMap()) {
    n.cast_bytes_per_s = number(node, what, "cast_gbyte_s", kCopyGbyteS) * 1e9;
    return;
  }
  check_keys(node, {"fp16", "bf16"}, what, "cast_gbyte_s");
  for (const char* wire : {"fp16", "bf16"}) {
    if (!node[wire]) continue;
    n.wire16[static_cast<size_t>(wire16_index(wire))].cast_bytes_per_s =
        number(node[wire], what, fmt::format("cast_gbyte_s.{}", wire), kCopyGbyteS) * 1e9;
  }
}

PublishedScaling parse_published(const YAML::Node& node, const std::string& what) {
  check_keys(node, {"model", "workers", "samples_per_s", "efficiency_pct", "baseline_workers", "source"}, what,
             "a published entry");
  PublishedScaling p;
  DLSCALE_CHECK(node["model"] && node["workers"], "{}: a published entry needs 'model' and 'workers'", at(what, node));
  p.model = text(node["model"], what, "model");
  p.workers = list<long long>(node["workers"], what, "workers", kWorkers);
  DLSCALE_CHECK(node["samples_per_s"].IsDefined() != node["efficiency_pct"].IsDefined(),
                "{}: a published entry needs one of samples_per_s or efficiency_pct", at(what, node));
  if (node["samples_per_s"]) p.samples_per_s = list<double>(node["samples_per_s"], what, "samples_per_s", kRate);
  if (node["efficiency_pct"]) p.efficiency_pct = list<double>(node["efficiency_pct"], what, "efficiency_pct", kEfficiencyPct);
  const size_t values = p.samples_per_s.size() + p.efficiency_pct.size();
  DLSCALE_CHECK(values == p.workers.size(), "{}: {} workers but {} values", at(what, node), p.workers.size(), values);
  if (node["baseline_workers"]) p.baseline_workers = static_cast<long long>(number(node["baseline_workers"], what,
                                                                                   "baseline_workers", kWorkers));
  if (node["source"]) p.source = text(node["source"], what, "source");
  return p;
}

}  // namespace

void SystemSpec::apply(PredictOptions& o) const {
  if (cores_per_node > 0) o.cores_per_node = cores_per_node;
  if (shared_cores > 0) o.shared_cores = shared_cores;
  if (threads_per_worker > 0) o.threads_per_worker = threads_per_worker;
  if (copy_bytes_per_s > 0) o.copy_bytes_per_s = copy_bytes_per_s;
  if (bucket_mb >= 0) o.bucket_mb = bucket_mb;
  if (first_bucket_mb >= 0) o.first_bucket_mb = first_bucket_mb;
}

double SystemSpec::rate(const std::string& model) const {
  for (const auto& [known, r] : rates) {
    if (known == model) return r;
  }
  return 0;
}

SystemSpec parse_system(const std::string& yaml_text, const std::string& what) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    throw Error(fmt::format("{}: not YAML: {}", what, e.what()));
  }
  check_keys(root,
             {"name", "description", "source", "workers_per_node", "intra", "inter", "cast_gbyte_s",
              "cores_per_node", "shared_cores", "copy_gbyte_s", "threads_per_worker", "bucket_mb",
              "first_bucket_mb", "strategy", "batch", "rates", "published", "fabric"},
             what, "a system file");
  SystemSpec s;
  DLSCALE_CHECK(root["name"] && root["inter"], "{}: a system needs 'name' and 'inter' (its network)", what);
  s.name = text(root["name"], what, "name");
  if (root["description"]) s.description = text(root["description"], what, "description");
  if (root["source"]) s.source = text(root["source"], what, "source");
  s.network.workers_per_node =
      root["workers_per_node"] ? static_cast<int>(number(root["workers_per_node"], what, "workers_per_node", kWorkersPerNode)) : 1;
  s.network.inter = parse_link(root["inter"], what, "inter");
  s.network.intra = root["intra"] ? parse_link(root["intra"], what, "intra") : s.network.inter;
  if (root["fabric"]) parse_fabric(root["fabric"], what, s);
  if (root["cast_gbyte_s"]) parse_cast(root["cast_gbyte_s"], what, s.network);
  if (root["cores_per_node"]) s.cores_per_node = static_cast<int>(number(root["cores_per_node"], what, "cores_per_node", kCores));
  if (root["copy_gbyte_s"]) s.copy_bytes_per_s = number(root["copy_gbyte_s"], what, "copy_gbyte_s", kCopyGbyteS) * 1e9;
  if (root["shared_cores"]) s.shared_cores = static_cast<int>(number(root["shared_cores"], what, "shared_cores", kCores));
  if (root["threads_per_worker"]) {
    s.threads_per_worker = static_cast<int>(number(root["threads_per_worker"], what, "threads_per_worker", kThreads));
  }
  if (root["bucket_mb"]) s.bucket_mb = number(root["bucket_mb"], what, "bucket_mb", kBucketMb);
  if (root["first_bucket_mb"]) s.first_bucket_mb = number(root["first_bucket_mb"], what, "first_bucket_mb", kBucketMb);
  if (root["strategy"]) s.strategy = text(root["strategy"], what, "strategy");
  if (root["batch"]) s.batch = static_cast<long long>(number(root["batch"], what, "batch", kBatch));
  if (root["rates"]) {
    DLSCALE_CHECK(root["rates"].IsMap(), "{}: 'rates' must map model names to samples/s", at(what, root["rates"]));
    DLSCALE_CHECK(s.batch > 0, "{}: 'rates' need the 'batch' they were measured at", what);
    for (const auto& kv : root["rates"]) {
      const std::string model = kv.first.as<std::string>();
      s.rates.emplace_back(model, number(kv.second, what, "rates." + model, kRate));
    }
  }
  if (root["published"]) {
    DLSCALE_CHECK(root["published"].IsSequence(), "{}: 'published' must be a list", at(what, root["published"]));
    for (const YAML::Node& item : root["published"]) s.published.push_back(parse_published(item, what));
  }
  return s;
}

SystemSpec load_system(const std::string& name_or_path, const std::string& systems_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_regular_file(name_or_path, ec)) return parse_system(read_file(name_or_path), name_or_path);
  const fs::path shipped = fs::path(systems_dir) / (name_or_path + ".yaml");
  const bool plain = name_or_path.find('/') == std::string::npos && !name_or_path.empty();
  if (plain && fs::is_regular_file(shipped, ec)) return parse_system(read_file(shipped.string()), shipped.string());
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(systems_dir, ec)) {
    if (e.path().extension() == ".yaml") names.push_back(e.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  throw Error(fmt::format("unknown system '{}': not a file, nor one of the shipped systems ({}) in {}", name_or_path,
                          names.empty() ? std::string("none found") : fmt::format("{}", fmt::join(names, ", ")),
                          systems_dir));
}

namespace {

Link commbench_link(const nlohmann::json& record, const std::string& what, bool& inter,
                    std::string& wire) {
  namespace in = record::input;
  DLSCALE_CHECK(record.is_object() && record.value(record::kKind, "") == record::kKindCommbench,
                "{}: not a 'dlscale commbench --json' record (kind must be 'commbench')", what);
  const nlohmann::json* fit = nullptr;
  const nlohmann::json& results =
      record.contains(record::kResults) ? record[record::kResults] : nlohmann::json();
  if (results.is_object() && results.contains(record::kFits) &&
      results[record::kFits].contains("allreduce")) {
    fit = &results[record::kFits]["allreduce"];
  }
  DLSCALE_CHECK(fit != nullptr, "{}: no allreduce fit (run 'dlscale commbench --op allreduce --json FILE')", what);
  const nlohmann::json& inputs =
      record.contains(record::kInputs) ? record[record::kInputs] : nlohmann::json();
  const double p = inputs.is_object() ? inputs.value(in::kWorldSize, 0.0) : 0.0;
  DLSCALE_CHECK(p >= 2, "{}: the allreduce was timed on {} rank(s); 2 or more are needed", what, p);
  // A float16 or bfloat16 allreduce folds its slower summing into the rate:
  // the rate of that wire type, not of float32 gradients.
  const std::string dtype =
      inputs.value(in::kCommbenchDtype, std::string("float32"));  // an object: p >= 2
  wire = dtype == "float32"    ? "none"
         : dtype == "float16"  ? "fp16"
         : dtype == "bfloat16" ? "bf16"
                               : "";
  DLSCALE_CHECK(!wire.empty(),
                "{}: the allreduce was timed in {}; a link's rate comes from a float32, float16 or "
                "bfloat16 commbench",
                what, dtype);
  const double bw = fit->value(record::kFitBandwidthGbps, 0.0);
  DLSCALE_CHECK(bw > 0, "{}: the allreduce fit has no bandwidth (time did not grow with size: use larger "
                "--max-bytes)", what);
  const nlohmann::json& cluster =
      inputs.contains(in::kCluster) ? inputs[in::kCluster] : nlohmann::json();
  inter = cluster.is_object() && cluster.value(in::kClusterHosts, 1) > 1;
  Link l;
  l.bytes_per_s = bw * 1e9 * 2 * (p - 1) / p;
  l.alpha_s = fit->value(record::kFitAlphaUs, 0.0) * 1e-6 / (2 * (p - 1));
  // A ping-pong's rate (--op sendrecv): one message at a time, one way.
  const nlohmann::json& fits = results[record::kFits];
  if (fits.contains("sendrecv") && fits["sendrecv"].is_object())
    l.one_way_bytes_per_s = fits["sendrecv"].value(record::kFitBandwidthGbps, 0.0) * 1e9;
  return l;
}

}  // namespace

Link link_from_commbench(const nlohmann::json& record, const std::string& what, bool& inter,
                         std::string& wire) {
  try {
    return commbench_link(record, what, inter, wire);
  } catch (const nlohmann::json::exception& e) {
    // A key of the wrong type (a hand-edited record): one line naming the file.
    throw Error(fmt::format("{}: a malformed commbench record: {}", what, e.what()));
  }
}

double shaped_hop_mbit(const nlohmann::json& record) {
  namespace in = record::input;
  if (!record.is_object() || !record.contains(record::kInputs) ||
      !record[record::kInputs].is_object())
    return 0;
  const nlohmann::json& inputs = record[record::kInputs];
  const nlohmann::json& cluster =
      inputs.contains(in::kCluster) ? inputs[in::kCluster] : nlohmann::json();
  if (!cluster.is_object() || cluster.value(in::kClusterHosts, 1) < 2) return 0;
  const double link = cluster.value(in::kClusterLinkMbit, 0.0);
  const double uplink =
      cluster.value(in::kClusterRackHosts, 0) > 0 ? cluster.value(in::kClusterUplinkMbit, 0.0) : 0;
  if (uplink > 0 && (link <= 0 || uplink <= link)) return uplink;
  return link > 0 ? link : 0;
}

namespace {

/// The network flags, within a system file's ranges (0 or < 0: not given).
void check_flags(const NetworkFlags& f) {
  const auto check = [](double v, bool given, Range r, const char* flag) {
    DLSCALE_CHECK(!given || (v >= r.lo && v <= r.hi), "{} must be in [{:g}, {:g}] (got {:g})", flag, r.lo, r.hi, v);
  };
  check(f.link_gbps, f.link_gbps > 0, kGbitS, "--link-gbps");
  check(f.intra_gbps, f.intra_gbps > 0, kGbitS, "--intra-gbps");
  check(f.latency_us, f.latency_us >= 0, kLatencyUs, "--latency-us");
  check(f.intra_latency_us, f.intra_latency_us >= 0, kLatencyUs, "--intra-latency-us");
  check(f.workers_per_node, f.workers_per_node > 0, kWorkersPerNode, "--workers-per-node");
  check(f.cast_gbyte_s, f.cast_gbyte_s >= 0, kCopyGbyteS, "--cast-gbyte-s");
  check(static_cast<double>(f.fabric_nodes), f.fabric_nodes != -1, {0, kGroupNodes.hi},
        "--fabric-nodes");
  check(f.fabric_gbps, f.fabric_gbps != 0, kGbitS, "--fabric-gbps");
}

/// The system's fabric, then the flags'; an oversubscription becomes an
/// uplink of nodes_per_group × the inter link / oversubscription.
void resolve_fabric(const NetworkFlags& f, const SystemSpec* system, Network& n) {
  if (f.fabric_nodes >= 0) n.fabric.nodes_per_group = f.fabric_nodes;
  if (f.fabric_gbps > 0) n.fabric.bytes_per_s = f.fabric_gbps * kGbit;
  if (n.fabric.nodes_per_group == 0) {
    n.fabric = {};
    return;
  }
  if (n.fabric.bytes_per_s <= 0 && system != nullptr && system->fabric_oversubscription > 0) {
    n.fabric.bytes_per_s = static_cast<double>(n.fabric.nodes_per_group) * n.inter.bytes_per_s /
                           system->fabric_oversubscription;
  }
  DLSCALE_CHECK(n.fabric.bytes_per_s > 0,
                "a fabric of {} nodes a group needs its uplink: --fabric-gbps (or the "
                "system file's fabric.uplink_gbit_s or oversubscription)",
                n.fabric.nodes_per_group);
}

}  // namespace

Network resolve_network(const NetworkFlags& f, const SystemSpec* system) {
  Network n;
  bool have_inter = system != nullptr, have_intra = system != nullptr;
  if (system != nullptr) n = system->network;
  for (const std::string& path : f.commbench) {
    bool inter = false;
    std::string wire;
    const Link l = link_from_commbench(read_json_file(path), path, inter, wire);
    if (wire16_index(wire) >= 0) {  // a 16-bit wire's own rate, not a link
      WireRate& rate = n.wire16[static_cast<size_t>(wire16_index(wire))];
      (inter ? rate.inter_bytes_per_s : rate.intra_bytes_per_s) = l.bytes_per_s;
      continue;
    }
    (inter ? n.inter : n.intra) = l;
    (inter ? have_inter : have_intra) = true;
  }
  check_flags(f);
  if (f.link_gbps > 0) {
    n.inter.set_rate(f.link_gbps * 1e9 / 8);
    have_inter = true;
  }
  if (f.latency_us >= 0) n.inter.alpha_s = f.latency_us * 1e-6;
  if (f.intra_gbps > 0) {
    n.intra.set_rate(f.intra_gbps * 1e9 / 8);
    have_intra = true;
  }
  if (f.intra_latency_us >= 0) n.intra.alpha_s = f.intra_latency_us * 1e-6;
  if (f.workers_per_node > 0) n.workers_per_node = f.workers_per_node;
  if (f.cast_gbyte_s >= 0) n.set_cast_rate(f.cast_gbyte_s * 1e9);  // the system's per type replaced
  DLSCALE_CHECK(have_inter || have_intra, "no network: give --system, --commbench RECORD or --link-gbps");
  if (!have_inter) n.inter = n.intra;
  if (!have_intra) n.intra = n.inter;
  resolve_fabric(f, system, n);
  return n;
}

}  // namespace dlscale::predict
