#include "launch/train_job.h"

#include <memory>

#include "cluster/cluster.h"
#include "core/error.h"
#include "dp/strategy.h"
#include "train/serve.h"
#include "train/trainer.h"

namespace dlscale::launch {
namespace {

/// Forwards to the console (rank 0) and reports progress to the launcher.
class WorkerObserver : public train::TrainObserver {
 public:
  WorkerObserver(train::TrainObserver* console, StatusWriter status)
      : console_(console), status_(status) {}
  void on_start(const train::TrainResult& r) override {
    status_.write("starting steps");
    if (console_) console_->on_start(r);
  }
  void on_phase(int64_t step, const char* phase) override {
    status_.write(fmt::format("step {} {}", step + 1, phase));
  }
  void on_step(const train::StepRecord& s, const train::TrainResult& r) override {
    if (console_) console_->on_step(s, r);
  }
  void on_eval(const train::EvalRecord& e, const train::TrainResult& r) override {
    if (console_) console_->on_eval(e, r);
  }
  void on_finish(const train::TrainResult& r) override {
    status_.write("finishing");
    if (console_) console_->on_finish(r);
  }

 private:
  train::TrainObserver* console_;
  StatusWriter status_;
};

train::WorkerContext worker_context(const WorkerSlot& slot) {
  train::WorkerContext ctx;
  ctx.rank = slot.env->rank;
  ctx.world_size = slot.comm != nullptr ? slot.env->world_size : 1;
  ctx.local_rank = slot.env->local_rank;
  ctx.local_world_size = slot.comm != nullptr ? slot.env->local_world_size : 1;
  ctx.comm = slot.comm;
  ctx.node_name = slot.node_name;
  return ctx;
}

void train_worker(const train::TrainOptions& options, const train::WorkerContext& ctx,
                  WorkerSlot& slot, const std::vector<std::string>& argv, std::ostream& out) {
  slot.status.write("building model");
  train::Trainer trainer(options, ctx, argv);
  train::ConsoleObserver console(out);
  WorkerObserver observer(slot.prints ? &console : nullptr, slot.status);
  trainer.run(observer);
}

}  // namespace

void run_train(const train::TrainOptions& options, const LaunchEnv& env,
               const std::vector<std::string>& argv, std::ostream& out) {
  // Validate once here, so bad input is one error, not one per worker.
  const launch::JobOptions job = train::job_options(options);
  int workers = env.is_worker() ? env.world_size - job.servers : 0;
  int local_workers = 0;
  // The cluster launcher checks the job it will start on every host.
  if (!options.cluster.empty() && env.cluster.name.empty()) {
    if (const auto spec = cluster::find_cluster(options.cluster)) {
      workers = spec->hosts * options.workers_per_host;
      local_workers = options.workers_per_host;
    }
  }
  const std::unique_ptr<dp::Strategy> strategy = dp::make_strategy(train::sync_options(options));
  DLSCALE_CHECK(!env.is_worker() || workers >= 1,
                "{} leave no worker among the job's {} ranks; start more ranks or use fewer shards",
                strategy->describe_servers(), env.world_size);
  train::TrainOptions with_cluster = options;
  with_cluster.cluster_hosts = env.cluster.hosts;  // for the record
  with_cluster.cluster_link_mbit = env.cluster.link_mbit;
  const train::ResolvedTrainOptions resolved =
      train::resolve_train_options(with_cluster, workers, local_workers);
  // A strategy that lays the variables out (more shards than variables):
  // one error, before anything starts.
  if (!env.is_worker()) strategy->check_model([&] { return train::model_numels(resolved); });
  run_job(train::job_options(resolved.options), env, argv, [&](WorkerSlot& slot) {
    // This rank's own strategy: what it splits off the job's communicator
    // must be gone before the communicator (MPI's finalize) is.
    const std::unique_ptr<dp::Strategy> arranged = dp::make_strategy(resolved.sync);
    const dp::Role role = arranged->arrange(slot.comm);
    if (role.serves) {
      train::serve(*arranged, resolved, [&](const std::string& status) { slot.status.write(status); });
      return;
    }
    train::WorkerContext ctx = worker_context(slot);
    if (slot.comm != nullptr) {
      ctx.rank = role.rank;
      ctx.world_size = role.size;
      ctx.comm = role.comm;
    }
    ctx.strategy = arranged.get();
    train_worker(with_cluster, ctx, slot, argv, out);
  });
}

}  // namespace dlscale::launch
