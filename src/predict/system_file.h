#pragma once
// System files (examples/systems/*.yaml, docs/predict.md): a published or
// local system described once — its network, the strategy its framework
// uses, one device's published samples/s per model, and the published
// scaling figures the predictions are checked against. No LibTorch.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "predict/collectives.h"

namespace dlscale::predict {

struct PredictOptions;

/// A published scaling figure: samples/s (or efficiency) at each N.
struct PublishedScaling {
  std::string model;
  std::vector<long long> workers;
  std::vector<double> samples_per_s;   ///< empty when efficiency_pct is given
  std::vector<double> efficiency_pct;  ///< weak-scaling efficiency against baseline_workers
  long long baseline_workers = 1;
  std::string source;
};

struct SystemSpec {
  std::string name;
  std::string description;
  std::string source;               ///< where the figures come from
  Network network;
  /// fabric.oversubscription: the uplink is nodes_per_group × inter / this
  /// (resolved once the inter link is known); 0 = the uplink is given.
  double fabric_oversubscription = 0;
  int cores_per_node = 0;           ///< oversubscription (0 = not modelled)
  int shared_cores = 0;             ///< cores every worker shares (one machine emulating a cluster)
  int threads_per_worker = 0;       ///< compute threads of each worker, with the cores
  double copy_bytes_per_s = 0;      ///< with shared_cores: the cores' rate of moving a rank's bytes (0 = free)
  double bucket_mb = -1;            ///< its framework's fusion buffer, MiB (< 0 = dlscale's 25)
  double first_bucket_mb = -1;      ///< (< 0 = dlscale's 1)
  std::string strategy;             ///< how its framework exchanges gradients ("" = not said)
  long long batch = 0;              ///< per device, of the rates and published figures
  std::vector<std::pair<std::string, double>> rates;  ///< model -> one device's samples/s at batch
  std::vector<PublishedScaling> published;
  /// Options with this system's cores and buckets (where it gives them).
  void apply(PredictOptions& options) const;
  /// One device's samples/s of `model`, or 0 when the file has none.
  double rate(const std::string& model) const;
};

/// Parses a system file's text; `what` names it in errors. Throws
/// dlscale::Error naming the key and the file on an unknown key, a missing
/// or bad value, or published lists of different lengths.
SystemSpec parse_system(const std::string& yaml_text, const std::string& what);

/// `name_or_path`: a file path, or the name of a shipped system (a file
/// NAME.yaml in `systems_dir`). Throws dlscale::Error listing the shipped
/// names when there is no such system.
SystemSpec load_system(const std::string& name_or_path, const std::string& systems_dir);

/// The link (α, bandwidth) a commbench record's allreduce fit implies for
/// one ring link: B = fitted B × 2(p−1)/p, α = fitted α / (2(p−1)). Sets
/// `inter` to whether the record's ranks spanned emulated hosts, and `wire`
/// to the wire type its messages had: "none" (float32), "fp16" (float16)
/// or "bf16" (bfloat16). Throws dlscale::Error naming `what` when the
/// record has no allreduce fit or another element type.
Link link_from_commbench(const nlohmann::json& record, const std::string& what, bool& inter,
                         std::string& wire);

/// The nominal rate (Mbit/s) of the narrowest shaped hop a commbench
/// record's ranks crossed on an emulated cluster: its racks' uplink when
/// that is shaped and no faster than the links, else the links; 0 when
/// the record ran on no cluster of 2+ hosts or on unshaped hops only.
double shaped_hop_mbit(const nlohmann::json& record);

/// The network flags of `predict` and `report --type predict`.
struct NetworkFlags {
  std::vector<std::string> commbench;  ///< commbench records
  double link_gbps = 0;                ///< between nodes, Gbit/s; 0 = not given
  double latency_us = -1;              ///< < 0 = not given
  double intra_gbps = 0;
  double intra_latency_us = -1;
  double cast_gbyte_s = -1;
  int workers_per_node = 0;            ///< 0 = not given
  long long fabric_nodes = -1;         ///< nodes under one uplink; 0 = no fabric; -1 = not given
  double fabric_gbps = 0;              ///< each uplink, Gbit/s; 0 = not given
};

/// The system's network (when given), then each commbench record's level
/// (a float16 or bfloat16 record: that wire type's own rate at its level),
/// then the flags; a level nothing gave copies the other; a fabric given by
/// its oversubscription gets its uplink from the inter link. Throws
/// dlscale::Error when nothing gives a network, or a fabric lacks its
/// group size or its uplink.
Network resolve_network(const NetworkFlags& flags, const SystemSpec* system);

}  // namespace dlscale::predict
