#pragma once
// The user's choice of gradient synchronisation (--strategy and its flags),
// typed, with their tables (core/option_table.h); no LibTorch needed to
// include it.
#include <deque>
#include <string>
#include <vector>

#include "core/enum_names.h"
#include "core/option_table.h"
#include "dp/ps_assign.h"

namespace dlscale::dp {

/// A --strategy word and its phrase in --strategy's help. The shipped
/// strategies are named once, in sync_options.cpp's table (their factories
/// in libtorch/dp/strategy.cpp's); dp::register_strategy() adds one at run time.
struct StrategyName {
  std::string name;
  std::string help;
  /// Its gradients are summed bucket by bucket by a bucket collective of the
  /// same word (libtorch/dp/bucket_collective.h), which `commbench --op` times.
  bool bucketed = false;
};
/// The strategies' words, in --strategy's help order; a deque, so that an
/// addition keeps the earlier entries where they were.
const std::deque<StrategyName>& strategy_names();
/// Adds a word; throws dlscale::Error when it is empty or taken.
void add_strategy_name(StrategyName name);
/// Throws dlscale::Error "unknown --strategy 'x'; allowed: ..." unless `name` is a strategy's.
void check_strategy_name(const std::string& name);
/// --strategy's help, from the table.
std::string strategy_help();
/// The words of the bucketed strategies ("allreduce", "tree", "hierarchical").
std::vector<std::string> bucket_collective_names();

/// The type gradients travel and are summed in.
enum class Compression { kNone, kFp16, kBf16 };
const EnumNames<Compression, 3>& enum_names(Compression);
std::string to_string(Compression compression);

/// When rank 0's batch-norm statistics (module buffers) are copied to the
/// other workers: never, once at start with the weights, or before every step
/// (PyTorch DDP's broadcast_buffers=True).
enum class SyncBuffers { kNone, kInit, kStep };
const EnumNames<SyncBuffers, 3>& enum_names(SyncBuffers);
std::string to_string(SyncBuffers policy);

/// --strategy zero --zero-stage 3: what is gathered at a time. The whole
/// model (FSDP's root-only wrapping), or each unit the model declares
/// (libtorch/models/units.h: a residual block, a Transformer layer), just before its
/// forward and again before its backward, the next one prefetched.
enum class ZeroUnit { kModel, kBlock };
const EnumNames<ZeroUnit, 2>& enum_names(ZeroUnit);
std::string to_string(ZeroUnit unit);

/// Parameter server (docs/strategies.md): where the shards run, how
/// variables are spread over them, and when a shard applies gradients.
enum class PsPlacement { kColocated, kDedicated };
enum class PsMode { kSync, kAsync };
const EnumNames<PsPlacement, 2>& enum_names(PsPlacement);
const EnumNames<PsAssign, 2>& enum_names(PsAssign);
const EnumNames<PsMode, 2>& enum_names(PsMode);
std::string to_string(PsPlacement placement);
std::string to_string(PsAssign assign);
std::string to_string(PsMode mode);

struct PsOptions {
  int shards = 1;
  PsPlacement placement = PsPlacement::kColocated;
  PsAssign assign = PsAssign::kRoundRobin;
  double partition_mb = 0;  ///< split tensors bigger than this over shards; 0 = never
  PsMode mode = PsMode::kSync;
  int max_staleness = -1;  ///< async: bound in versions (stale synchronous parallel); -1 = none

  template <typename Self, typename Visitor>
  static void table(Self& s, Visitor&& v) {
    v(Option{"--ps-shards",
             "Server shards the variables are spread over (colocated: at most one per worker)",
             record::input::kPsShards}
          .agreed(),
      s.shards);
    v(Option{"--ps-placement",
             "colocated (the first K workers also host a shard each, on a server thread) | "
             "dedicated (K extra server processes: the launcher starts them beside the workers on "
             "node 0; under mpirun/srun the first K ranks serve; servers are not counted as "
             "workers)",
             record::input::kPsPlacement}
          .agreed(),
      s.placement);
    v(Option{"--ps-assign",
             "How variables go to shards: round-robin (registration order) | greedy (largest "
             "first onto the least-loaded shard by bytes)",
             record::input::kPsAssign}
          .agreed(),
      s.assign);
    v(Option{"--ps-partition-mb",
             "Split tensors bigger than this many MiB into near-equal pieces placed separately; 0 "
             "= never split",
             record::input::kPsPartitionMb}
          .agreed(),
      s.partition_mb);
    v(Option{"--ps-mode",
             "sync (each shard sums all workers' gradients, applies once per step) | async (each "
             "gradient applied on arrival; workers pull whatever is current)",
             record::input::kPsMode}
          .agreed(),
      s.mode);
    v(Option{"--max-staleness",
             "async: a worker waits in pull until no applied gradient can be more than this many "
             "versions stale (stale synchronous parallel; 0 = one worker at a time); -1 = "
             "unbounded",
             "max_staleness"}
          .agreed(),
      s.max_staleness);
  }
};

struct SyncOptions {
  std::string strategy = "allreduce";  ///< a word of strategy_names()
  Compression compress = Compression::kNone;
  /// hierarchical: ranks r / ranks_per_node form a node; 0 = group by node name.
  int ranks_per_node = 0;
  double bucket_mb = 25.0;       ///< bucket capacity in MiB; 0 = one bucket after backward
  double first_bucket_mb = 1.0;  ///< capacity of the first bucket (the last layers' gradients)
  SyncBuffers sync_buffers = SyncBuffers::kInit;
  int zero_stage = 1;  ///< --strategy zero: 1 = optimizer state sharded, 2 = and gradients, 3 = and parameters
  ZeroUnit zero_unit = ZeroUnit::kModel;  ///< stage 3: gathered whole, or unit by unit
  PsOptions ps;  ///< --strategy ps only (its own table)

  /// The strategy's own flags; PsOptions has its table (a help group of its own).
  template <typename Self, typename Visitor>
  static void table(Self& s, Visitor&& v) {
    v(Option{"--strategy", strategy_help(), record::input::kStrategy}.agreed().words(
          check_strategy_name),
      s.strategy);
    v(Option{"--compress",
             "none | fp16 | bf16: gradients travel and are summed in this type, then are cast "
             "back to float32 (allreduce, tree, hierarchical, zero)",
             record::input::kCompress}
          .agreed(),
      s.compress);
    v(Option{"--ranks-per-node",
             "hierarchical: form node groups of this many consecutive ranks; 0 = group by host "
             "(by launcher node for --workers/--nnodes jobs)",
             "ranks_per_node"}
          .agreed(),
      s.ranks_per_node);
    v(Option{"--bucket-mb",
             "Gradient bucket size in MiB; each bucket's collective overlaps backward. 0 = one "
             "bucket of all gradients reduced after backward (no overlap)",
             record::input::kBucketMb}
          .agreed(),
      s.bucket_mb);
    v(Option{"--first-bucket-mb", "Size of the first bucket (the last layers' gradients) in MiB",
             record::input::kFirstBucketMb}
          .agreed(),
      s.first_bucket_mb);
    v(Option{"--zero-stage",
             "--strategy zero: 1 (optimizer state sharded over the workers) | 2 (and gradients: "
             "each worker keeps only its shard of the reduced gradients) | 3 (and parameters: "
             "between steps a worker keeps only its shard; the whole model, as one unit, is "
             "gathered before forward and freed after backward)",
             record::input::kZeroStage}
          .agreed(),
      s.zero_stage);
    v(Option{"--zero-unit",
             "--zero-stage 3: model (the whole model is gathered before forward and kept until "
             "backward ends) | block (each of the model's units, a residual block or a "
             "Transformer layer, is gathered just before its forward and again before its "
             "backward, the next one prefetched, and freed after each; the rest of the model is "
             "gathered for the whole step)",
             "zero_unit"}
          .agreed(),
      s.zero_unit);
    v(Option{"--sync-buffers",
             "When rank 0's batch-norm statistics are copied to all workers: none | init (with "
             "the weights at start) | step (before every step)",
             "sync_buffers"}
          .agreed(),
      s.sync_buffers);
  }
};

/// Throws dlscale::Error when the combination is impossible (sizes < 0,
/// compression with independent, PS flags without --strategy ps, ...).
void check_sync_options(const SyncOptions& options);

}  // namespace dlscale::dp
