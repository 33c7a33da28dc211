#include "dp/strategy.h"

#include "core/error.h"
#include "dp/bucketed_sync.h"
#include "dp/independent_sync.h"

namespace dlscale::dp {

std::unique_ptr<Strategy> make_ps_strategy(const SyncOptions& options);    // ps_strategy.cpp
std::unique_ptr<Strategy> make_zero_strategy(const SyncOptions& options);  // zero_strategy.cpp

Role Strategy::arrange(comm::Communicator* world) {
  if (world == nullptr) return {};
  return {false, world, world->rank(), world->size()};
}

void Strategy::serve(const ServeContext& /*context*/) {
  throw InternalError("serve() called on a strategy without servers");
}

namespace {

/// allreduce, tree, hierarchical: gradients in buckets, each bucket's
/// collective overlapping the rest of backward.
class BucketedStrategy : public Strategy {
 public:
  explicit BucketedStrategy(const SyncOptions& options) : options_(options) {}
  std::unique_ptr<GradientSync> make_sync(std::vector<torch::Tensor> params,
                                          const SyncContext& c) override {
    if (c.comm == nullptr || c.comm->size() == 1) return make_independent_sync();
    auto collective = make_bucket_collective(to_string(options_.strategy), *c.comm,
                                             options_.ranks_per_node, c.node_name);
    return std::make_unique<BucketedSync>(std::move(params), *c.comm, std::move(collective), options_);
  }

 private:
  SyncOptions options_;
};

/// No exchange: each worker trains its own replica (the compute-only ceiling).
class IndependentStrategy : public Strategy {
 public:
  std::string checkpoint_refusal() const override { return "replicas that differ"; }
  std::unique_ptr<GradientSync> make_sync(std::vector<torch::Tensor> /*params*/,
                                          const SyncContext& /*context*/) override {
    return make_independent_sync();
  }
};

}  // namespace

std::unique_ptr<Strategy> make_strategy(const SyncOptions& options) {
  check_sync_options(options);
  switch (options.strategy) {
    case StrategyKind::kPs:
      return make_ps_strategy(options);
    case StrategyKind::kZero:
      return make_zero_strategy(options);
    case StrategyKind::kIndependent:
      return std::make_unique<IndependentStrategy>();
    default:
      return std::make_unique<BucketedStrategy>(options);
  }
}

std::vector<std::string> strategy_section_keys() { return {"ps", "zero"}; }

}  // namespace dlscale::dp
