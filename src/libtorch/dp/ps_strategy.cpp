// --strategy ps as a Strategy (libtorch/dp/strategy.h): K shards, on K dedicated
// server processes (the first ranks) or hosted by the first K workers on a
// thread of their own; what the parameter server cannot do for a run; and
// a dedicated server's life.
#include <fmt/format.h>

#include "core/error.h"
#include "dp/ps_plan.h"
#include "libtorch/dp/ps_shard.h"
#include "libtorch/dp/ps_sync.h"
#include "libtorch/dp/strategy.h"

namespace dlscale::dp {
namespace {

class PsStrategy : public Strategy {
 public:
  explicit PsStrategy(const SyncOptions& options) : options_(options) {}

  int servers() const override { return dedicated() ? options_.ps.shards : 0; }
  std::string describe_servers() const override {
    return fmt::format("--ps-shards {} dedicated server(s)", options_.ps.shards);
  }

  void check(const RunNeeds& n) const override {
    // Shards hold the optimizer over flat slices of the variables: no
    // per-tensor groups and no per-step rate from the workers.
    DLSCALE_CHECK(!n.per_tensor_update && !n.changing_rate,
                  "--strategy ps applies updates on its shards over flat slices of the variables "
                  "with a constant rate: --optimizer lars, --wd-exclude bias-norm, "
                  "--lr-schedule and --warmup-epochs need another strategy");
    DLSCALE_CHECK(!n.stops_early,
                  "--target-accuracy stops a run early, which --strategy ps cannot: its shards "
                  "serve a fixed number of steps");
    DLSCALE_CHECK(!n.steps_from_data,
                  "--epochs makes the run's length follow from the data, which the shards of "
                  "--strategy ps do not read: give --steps");
    DLSCALE_CHECK(!n.sparse_gradients,
                  "--sparse-embeddings sends an embedding's rows, which the parameter server's "
                  "shards (dense slices of the variables) do not take: use --strategy allreduce, "
                  "tree or hierarchical");
    DLSCALE_CHECK(!n.clips_gradients,
                  "--clip-grad-norm clips the workers' averaged gradient, which only the parameter "
                  "server's shards see: use another strategy");
    DLSCALE_CHECK(!n.averaged_gradient || options_.ps.mode == PsMode::kSync,
                  "--noise-scale needs the workers' averaged gradient, which --ps-mode async never "
                  "forms (its shards apply each worker's gradient alone): use --ps-mode sync");
    DLSCALE_CHECK(!n.whole_average,
                  "--noise-final needs the averaged gradient on every worker without applying it, "
                  "and --strategy ps forms it on its shards, which apply it: use --strategy "
                  "allreduce, tree or hierarchical");
    DLSCALE_CHECK(!n.loss_scaling,
                  "--amp fp16 scales the loss and unscales combined gradients, which the parameter "
                  "server's shards never see: use --amp bf16 with --strategy ps");
    DLSCALE_CHECK(!n.buffers_every_step || options_.ps.mode != PsMode::kAsync,
                  "--sync-buffers step broadcasts before every step, which needs workers in "
                  "lockstep; --ps-mode async workers are not: use --sync-buffers init or none");
    DLSCALE_CHECK(dedicated() || options_.ps.shards <= n.workers,
                  "--ps-shards {} with --ps-placement colocated needs as many workers to host them "
                  "(got {}); use fewer shards or --ps-placement dedicated",
                  options_.ps.shards, n.workers);
  }

  void check_model(const std::function<std::vector<int64_t>()>& numels) const override {
    plan(numels(), 4);  // more shards than variables: one error, before anything starts
  }

  std::string checkpoint_refusal() const override { return "optimizer state on its shards"; }

  Role arrange(comm::Communicator* world) override;
  void serve(const ServeContext& context) override;

  std::unique_ptr<GradientSync> make_sync(std::vector<torch::Tensor> params,
                                          const SyncContext& context) override {
    return make_ps_sync(std::move(params), options_, layout_, context);
  }

 private:
  bool dedicated() const { return options_.ps.placement == PsPlacement::kDedicated; }
  PsPlan plan(const std::vector<int64_t>& numels, int64_t element_bytes) const {
    return plan_ps(numels, options_.ps.shards, options_.ps.assign, options_.ps.partition_mb,
                   options_.bucket_mb, options_.first_bucket_mb, element_bytes);
  }

  SyncOptions options_;
  PsLayout layout_;
  std::unique_ptr<comm::Communicator> split_;  ///< the communicator arrange() made
  int server_ = -1;                            ///< the shard this rank serves (dedicated)
};

Role PsStrategy::arrange(comm::Communicator* world) {
  const int shards = options_.ps.shards;
  for (int s = 0; s < shards; ++s) layout_.shard_ranks.push_back(s);
  if (world == nullptr) {
    layout_.local_shard = 0;  // one process: the worker and its shard
    return {};
  }
  DLSCALE_CHECK(world->concurrent_point_to_point(),
                "--strategy ps serves each worker from its own thread and needs "
                "MPI_THREAD_MULTIPLE: use --mpi-collectives blocking (the default) with an MPI "
                "library that provides it, or --backend gloo");
  if (!dedicated()) {
    // Shard threads and workers share a duplicate of the world, point to point only.
    split_ = world->split(0, world->rank());
    layout_.comm = split_.get();
    for (int r = 0; r < split_->size(); ++r) layout_.worker_ranks.push_back(r);
    layout_.local_shard = split_->rank() < shards ? split_->rank() : -1;
    return {false, world, world->rank(), world->size()};
  }
  // The first K ranks serve; the others train on a communicator of their own.
  const bool server = world->rank() < shards;
  split_ = world->split(server ? -1 : 0, world->rank());
  layout_.comm = world;
  for (int r = shards; r < world->size(); ++r) layout_.worker_ranks.push_back(r);
  if (server) {
    server_ = world->rank();
    return {true, nullptr, 0, 0};
  }
  return {false, split_.get(), world->rank() - shards, world->size() - shards};
}

void PsStrategy::serve(const ServeContext& c) {
  DLSCALE_ASSERT(server_ >= 0);
  c.status(fmt::format("ps shard {} serving", server_));
  const PsPlan whole = plan(c.numels, c.element_bytes);
  PsShardConfig config;
  config.shard = server_;
  config.plan = whole.shards[server_];
  for (int r : layout_.worker_ranks) config.workers.push_back({layout_.comm, r});
  config.steps = c.steps;
  config.warmup = c.warmup;
  config.mode = options_.ps.mode;
  config.max_staleness = options_.ps.max_staleness;
  config.noise_every = c.noise_every;
  config.make_optimizer = c.make_optimizer;
  const int shard = server_;
  config.on_update = [&c, shard](int64_t version) {
    c.status(fmt::format("ps shard {} at version {}", shard, version));
  };
  PsShard(std::move(config)).run();
  c.status(fmt::format("ps shard {} done", server_));
}

}  // namespace

std::unique_ptr<Strategy> make_ps_strategy(const SyncOptions& options) {
  return std::make_unique<PsStrategy>(options);
}

}  // namespace dlscale::dp
