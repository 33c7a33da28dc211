#include "libtorch/launch/train_job.h"

#include <memory>

#include "cluster/cluster.h"
#include "core/error.h"
#include "libtorch/dp/strategy.h"
#include "libtorch/train/serve.h"
#include "libtorch/train/trainer.h"

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
  void on_final_noise(int64_t done, int64_t total, double seconds) override {
    status_.write(fmt::format("noise scale at the final weights, batch {} of {}", done, total));
    if (console_) console_->on_final_noise(done, total, seconds);
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

void train_worker(const train::ResolvedTrainOptions& config, const train::WorkerContext& ctx,
                  WorkerSlot& slot, const std::vector<std::string>& argv, std::ostream& out) {
  slot.status.write("building model");
  train::Trainer trainer(config, ctx, argv);
  train::ConsoleObserver console(out);
  WorkerObserver observer(slot.prints ? &console : nullptr, slot.status);
  trainer.run(observer);
}

/// The number of workers of the job, and of this node's: known in a worker
/// (its environment), and before a cluster launch (the cluster's hosts).
std::pair<int, int> job_size(const TrainJobOptions& options, const LaunchEnv& env, int servers) {
  if (env.is_worker()) return {env.world_size - servers, env.local_world_size};
  const LaunchOptions& l = options.launch;
  if (!l.cluster.empty() && env.cluster.name.empty()) {
    if (const auto spec = cluster::find_cluster(l.cluster)) {
      return {spec->hosts * l.workers_per_host, l.workers_per_host};
    }
  }
  return {l.nnodes * l.workers, l.workers};
}

}  // namespace

void run_train(const TrainJobOptions& options, const LaunchEnv& env,
               const std::vector<std::string>& argv, std::ostream& out) {
  prepare_launcher(env);
  // Validated once here, so bad input is one error, not one per worker.
  const std::unique_ptr<dp::Strategy> strategy = dp::make_strategy(options.train.sync);
  check_job_options(job_of(options, options.train.compute.threads, strategy->servers()));
  const auto [workers, local_workers] = job_size(options, env, strategy->servers());
  DLSCALE_CHECK(workers >= 1,
                "{} leave no worker among the job's {} ranks; start more ranks or use fewer shards",
                strategy->describe_servers(), env.world_size);
  train::ResolvedTrainOptions resolved = train::resolve_train_options(options.train, workers, local_workers);
  resolved.timeout = job_of(options, 1, 0).timeout();
  resolved.launch_inputs = launch_inputs(
      options.launch, {env.cluster.hosts, env.cluster.link_mbit, env.cluster.rack_hosts,
                       env.cluster.uplink_mbit, env.cluster.tcp_cc});
  resolved.launch_inputs["slurm"] = env.slurm.to_json();
  // A strategy that lays the variables out (more shards than variables):
  // one error, before anything starts.
  if (!env.is_worker()) strategy->check_model([&] { return train::model_numels(resolved); });
  const JobOptions job = job_of(options, resolved.options.compute.threads, strategy->servers());
  run_job(job, env, argv, [&](WorkerSlot& slot) {
    // This rank's own strategy: what it splits off the job's communicator
    // must be gone before the communicator (MPI's finalize) is.
    const std::unique_ptr<dp::Strategy> arranged = dp::make_strategy(resolved.options.sync);
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
    train_worker(resolved, ctx, slot, argv, out);
  });
}

}  // namespace dlscale::launch
