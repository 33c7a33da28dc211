#include "dp/sync_options.h"

#include "core/enum_names.h"
#include "core/error.h"

namespace dlscale::dp {

namespace {

constexpr EnumNames<Strategy, 4> kStrategies{"--strategy",
                                             {{{Strategy::kAllreduce, "allreduce"},
                                               {Strategy::kTree, "tree"},
                                               {Strategy::kHierarchical, "hierarchical"},
                                               {Strategy::kIndependent, "independent"}}}};
constexpr EnumNames<Compression, 3> kCompressions{
    "--compress",
    {{{Compression::kNone, "none"}, {Compression::kFp16, "fp16"}, {Compression::kBf16, "bf16"}}}};

}  // namespace

Strategy parse_strategy(const std::string& name) { return kStrategies.parse(name); }
std::string to_string(Strategy strategy) { return kStrategies.name(strategy); }
Compression parse_compression(const std::string& name) { return kCompressions.parse(name); }
std::string to_string(Compression compression) { return kCompressions.name(compression); }

void check_sync_options(const SyncOptions& o) {
  DLSCALE_CHECK(o.bucket_mb >= 0, "--bucket-mb must be >= 0 (got {}; 0 = no overlap)", o.bucket_mb);
  DLSCALE_CHECK(o.first_bucket_mb > 0, "--first-bucket-mb must be > 0 (got {})", o.first_bucket_mb);
  DLSCALE_CHECK(o.ranks_per_node >= 0, "--ranks-per-node must be >= 0 (got {}; 0 = by host)",
                o.ranks_per_node);
  DLSCALE_CHECK(o.strategy != Strategy::kIndependent || o.compress == Compression::kNone,
                "--compress {} needs a strategy that exchanges gradients; --strategy independent "
                "sends none",
                to_string(o.compress));
  DLSCALE_CHECK(o.ranks_per_node == 0 || o.strategy == Strategy::kHierarchical,
                "--ranks-per-node applies to --strategy hierarchical only (got --strategy {})",
                to_string(o.strategy));
}

}  // namespace dlscale::dp
