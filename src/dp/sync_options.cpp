#include "dp/sync_options.h"

#include "core/enum_names.h"
#include "core/error.h"
#include "core/text.h"

namespace dlscale::dp {

namespace {

std::deque<StrategyName>& name_table() {
  static std::deque<StrategyName> names{
      {"allreduce", "backend-native, bucketed", true},
      {"tree", "binary tree to rank 0 and back over send/recv", true},
      {"hierarchical", "reduce in each node, allreduce among node leaders, broadcast in the node",
       true},
      {"independent", "no exchange: each worker trains its own replica", false},
      {"ps",
       "parameter server: workers push gradients to shards that own the variables and their "
       "optimizer, "
       "and pull the new values",
       false},
      {"zero",
       "sharded data parallelism, ZeRO: buckets are reduce-scattered, each worker updates its "
       "shard of "
       "the parameters and optimizer state, and the parameters are all-gathered; see --zero-stage",
       false}};
  return names;
}

constexpr EnumNames<Compression, 3> kCompressions{
    "--compress",
    {{{Compression::kNone, "none"}, {Compression::kFp16, "fp16"}, {Compression::kBf16, "bf16"}}}};

constexpr EnumNames<PsPlacement, 2> kPlacements{
    "--ps-placement",
    {{{PsPlacement::kColocated, "colocated"}, {PsPlacement::kDedicated, "dedicated"}}}};
constexpr EnumNames<PsAssign, 2> kAssigns{
    "--ps-assign", {{{PsAssign::kRoundRobin, "round-robin"}, {PsAssign::kGreedy, "greedy"}}}};
constexpr EnumNames<PsMode, 2> kModes{"--ps-mode",
                                      {{{PsMode::kSync, "sync"}, {PsMode::kAsync, "async"}}}};
constexpr EnumNames<SyncBuffers, 3> kSyncBuffers{
    "--sync-buffers",
    {{{SyncBuffers::kNone, "none"}, {SyncBuffers::kInit, "init"}, {SyncBuffers::kStep, "step"}}}};
constexpr EnumNames<ZeroUnit, 2> kZeroUnits{
    "--zero-unit", {{{ZeroUnit::kModel, "model"}, {ZeroUnit::kBlock, "block"}}}};

void check_ps_options(const SyncOptions& o) {
  const PsOptions& ps = o.ps;
  const PsOptions defaults;
  if (o.strategy != "ps") {
    DLSCALE_CHECK(
        ps.shards == defaults.shards && ps.placement == defaults.placement &&
            ps.assign == defaults.assign && ps.partition_mb == defaults.partition_mb &&
            ps.mode == defaults.mode && ps.max_staleness == defaults.max_staleness,
        "--ps-* flags and --max-staleness apply to --strategy ps only (got --strategy {})",
        o.strategy);
    return;
  }
  DLSCALE_CHECK(ps.shards >= 1, "--ps-shards must be >= 1 (got {})", ps.shards);
  DLSCALE_CHECK(ps.partition_mb >= 0, "--ps-partition-mb must be >= 0 (got {}; 0 = never split)",
                ps.partition_mb);
  DLSCALE_CHECK(ps.max_staleness >= -1, "--max-staleness must be >= 0 (got {})", ps.max_staleness);
  DLSCALE_CHECK(ps.max_staleness < 0 || ps.mode == PsMode::kAsync,
                "--max-staleness bounds --ps-mode async only (got --ps-mode {})",
                to_string(ps.mode));
  DLSCALE_CHECK(o.compress == Compression::kNone,
                "--compress {} is not supported with --strategy ps (gradients travel in float32)",
                to_string(o.compress));
}

}  // namespace

const EnumNames<Compression, 3>& enum_names(Compression) { return kCompressions; }
const EnumNames<SyncBuffers, 3>& enum_names(SyncBuffers) { return kSyncBuffers; }
const EnumNames<PsPlacement, 2>& enum_names(PsPlacement) { return kPlacements; }
const EnumNames<PsAssign, 2>& enum_names(PsAssign) { return kAssigns; }
const EnumNames<PsMode, 2>& enum_names(PsMode) { return kModes; }
const EnumNames<ZeroUnit, 2>& enum_names(ZeroUnit) { return kZeroUnits; }
std::string to_string(ZeroUnit unit) { return kZeroUnits.name(unit); }
const std::deque<StrategyName>& strategy_names() { return name_table(); }

void add_strategy_name(StrategyName name) {
  DLSCALE_CHECK(!name.name.empty(), "a strategy needs a name");
  for (const StrategyName& n : strategy_names()) {
    DLSCALE_CHECK(n.name != name.name, "strategy '{}' is taken", name.name);
  }
  name_table().push_back(std::move(name));
}

void check_strategy_name(const std::string& name) {
  std::vector<std::string> names;
  for (const StrategyName& n : strategy_names()) {
    if (n.name == name) return;
    names.push_back(n.name);
  }
  throw Error(fmt::format("unknown --strategy '{}'; allowed: {}", name, join(names, ", ")));
}

std::vector<std::string> bucket_collective_names() {
  std::vector<std::string> names;
  for (const StrategyName& n : strategy_names()) {
    if (n.bucketed) names.push_back(n.name);
  }
  return names;
}

std::string strategy_help() {
  std::vector<std::string> parts;
  for (const StrategyName& n : strategy_names()) parts.push_back(n.name + " (" + n.help + ")");
  return "How gradients are combined (docs/strategies.md): " + join(parts, " | ");
}
std::string to_string(Compression compression) { return kCompressions.name(compression); }
std::string to_string(SyncBuffers policy) { return kSyncBuffers.name(policy); }
std::string to_string(PsPlacement placement) { return kPlacements.name(placement); }
std::string to_string(PsAssign assign) { return kAssigns.name(assign); }
std::string to_string(PsMode mode) { return kModes.name(mode); }

void check_sync_options(const SyncOptions& o) {
  check_strategy_name(o.strategy);
  DLSCALE_CHECK(o.bucket_mb >= 0, "--bucket-mb must be >= 0 (got {}; 0 = no overlap)", o.bucket_mb);
  DLSCALE_CHECK(o.first_bucket_mb > 0, "--first-bucket-mb must be > 0 (got {})", o.first_bucket_mb);
  DLSCALE_CHECK(o.ranks_per_node >= 0, "--ranks-per-node must be >= 0 (got {}; 0 = by host)",
                o.ranks_per_node);
  DLSCALE_CHECK(o.strategy != "independent" || o.compress == Compression::kNone,
                "--compress {} needs a strategy that exchanges gradients; --strategy independent "
                "sends none",
                to_string(o.compress));
  DLSCALE_CHECK(o.ranks_per_node == 0 || o.strategy == "hierarchical",
                "--ranks-per-node applies to --strategy hierarchical only (got --strategy {})",
                o.strategy);
  DLSCALE_CHECK(o.zero_stage == SyncOptions{}.zero_stage || o.strategy == "zero",
                "--zero-stage applies to --strategy zero only (got --strategy {})", o.strategy);
  DLSCALE_CHECK(o.zero_stage >= 1 && o.zero_stage <= 3, "--zero-stage must be 1, 2 or 3 (got {})",
                o.zero_stage);
  if (o.zero_unit == ZeroUnit::kBlock) {
    DLSCALE_CHECK(
        o.strategy == "zero" && o.zero_stage == 3,
        "--zero-unit block applies to --strategy zero --zero-stage 3 only (stages 1 and 2 "
        "keep every parameter)");
    DLSCALE_CHECK(o.bucket_mb > 0,
                  "--zero-unit block reduce-scatters each unit's gradients as its backward ends, "
                  "which needs --bucket-mb > 0 (got 0)");
  }
  check_ps_options(o);
}

}  // namespace dlscale::dp
