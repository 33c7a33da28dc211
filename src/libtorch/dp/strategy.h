#pragma once
// What a --strategy is to the rest of dlscale (docs/architecture.md,
// "Strategies"): the processes it needs, what it cannot do for a run, the
// part each rank plays, the worker's gradient synchronisation, and its own
// section of the record. Nothing outside src/dp/ names a strategy: the
// launcher asks servers(), each rank arrange(), a server serve(), a worker's
// trainer make_sync() and, at the end, the GradientSync's report().
// make_strategy() maps the user's word to one, by strategy.cpp's table of
// factories (the words and their help are dp/sync_options.cpp's):
//   allreduce, tree, hierarchical  bucketed_sync + their bucket collective
//   independent                    no exchange (the compute-only ceiling)
//   ps                             ps_strategy: servers, shards and pushes
//   zero                           zero_strategy: sharded optimizer state, gradients, parameters
// register_strategy() adds one at run time.
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "libtorch/comm/communicator.h"
#include "libtorch/dp/gradient_sync.h"
#include "dp/sync_options.h"

namespace dlscale::dp {

/// What a run asks that a strategy may be unable to honour (checked before
/// anything starts).
struct RunNeeds {
  bool per_tensor_update = false;   ///< LARS, or weight decay exempting some tensors
  bool changing_rate = false;       ///< a learning-rate schedule or warm-up
  bool checkpoints = false;         ///< --checkpoint or --resume
  bool stops_early = false;         ///< --target-accuracy
  bool steps_from_data = false;     ///< --epochs: the run's length follows from the data
  bool loss_scaling = false;        ///< --amp fp16
  bool buffers_every_step = false;  ///< --sync-buffers step
  bool clips_gradients = false;     ///< --clip-grad-norm: the averaged gradient's norm
  bool sparse_gradients = false;    ///< --sparse-embeddings: embedding tables' gradients are sparse
  bool averaged_gradient = false;   ///< --noise-scale: the workers' averaged gradient's norm
  bool whole_average = false;       ///< --noise-final: every worker's whole average, unapplied
  int workers = 1;
};

/// A rank's part in the job, as its strategy arranged it.
struct Role {
  bool serves = false;                 ///< a server process: it runs serve(), not a trainer
  comm::Communicator* comm = nullptr;  ///< what the workers' collectives use; null for one worker
  int rank = 0;                        ///< among the workers
  int size = 1;                        ///< workers
};

/// What a server process needs to serve a run.
struct ServeContext {
  std::vector<int64_t> numels;  ///< the model's parameters, registration order
  int64_t element_bytes = 4;    ///< of the parameters' type
  OptimizerFactory make_optimizer;
  int64_t steps = 0;
  int64_t warmup = 0;
  int64_t noise_every = 0;  ///< steps between noise-scale measurements (0: none)
  std::function<void(const std::string&)> status;  ///< progress lines for the launcher
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  /// Processes the job needs besides its workers: the first ranks, on node
  /// 0 (a launcher starts them; under mpirun/srun the first ranks serve).
  virtual int servers() const { return 0; }
  /// "--ps-shards 2 dedicated server(s)": how errors name the servers.
  virtual std::string describe_servers() const { return ""; }
  /// Throws dlscale::Error naming what this strategy cannot do for the run.
  virtual void check(const RunNeeds& needs) const {}
  /// Throws dlscale::Error when the model cannot be laid out (more shards
  /// than variables, say); `numels` is called only by strategies that need it.
  virtual void check_model(const std::function<std::vector<int64_t>()>& numels) const {}
  /// Why a checkpoint of worker 0 would not hold the run's state; "" when it would.
  virtual std::string checkpoint_refusal() const { return ""; }
  /// Every rank, once, before its model is built: this rank's part.
  /// Collective over `world` (it may split it); `world` is null for a job
  /// of one process. The strategy keeps what it splits.
  virtual Role arrange(comm::Communicator* world);
  /// A server's whole life (servers() > 0); returns when the run ends.
  virtual void serve(const ServeContext& context);
  /// The worker's gradient synchronisation for `params` (registration
  /// order), after arrange(). Collective over the workers.
  virtual std::unique_ptr<GradientSync> make_sync(std::vector<torch::Tensor> params,
                                                  const SyncContext& context) = 0;
};

/// The strategy of `options`; throws dlscale::Error when they are impossible.
std::unique_ptr<Strategy> make_strategy(const SyncOptions& options);

using StrategyFactory = std::function<std::unique_ptr<Strategy>(const SyncOptions&)>;

/// A strategy added at run time: its --strategy word and help, its factory,
/// and its record section's key ("" when its report() adds none).
struct StrategyEntry {
  StrategyName name;
  StrategyFactory make;
  std::string section_key;
};
/// Adds `entry` for --strategy and make_strategy(); throws dlscale::Error
/// when its word is empty or taken, or it has no factory.
void register_strategy(StrategyEntry entry);

/// The factory of a bucketed strategy (allreduce, tree, hierarchical):
/// gradients in buckets, each summed by the bucket collective of the
/// strategy's word (make_bucket_collective) as backward goes on.
StrategyFactory bucketed_strategy();

/// The record key of every strategy's own section ("ps"): a run's
/// results.<key> holds its strategy's section and null for the others.
std::vector<std::string> strategy_section_keys();

}  // namespace dlscale::dp
