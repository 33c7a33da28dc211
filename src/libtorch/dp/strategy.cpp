#include "libtorch/dp/strategy.h"

#include <deque>

#include "core/error.h"
#include "libtorch/dp/bucketed_sync.h"
#include "libtorch/dp/independent_sync.h"
#include "libtorch/dp/sparse_sync.h"

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
    SplitParams split = split_sparse(params, c.sparse);
    if (c.comm == nullptr || c.comm->size() == 1) {
      return with_sparse_gradients(make_independent_sync(), std::move(split.sparse), nullptr);
    }
    auto collective =
        make_bucket_collective(options_.strategy, *c.comm, options_.ranks_per_node, c.node_name);
    return with_sparse_gradients(
        std::make_unique<BucketedSync>(std::move(split.dense), *c.comm, std::move(collective), options_),
        std::move(split.sparse), c.comm);
  }

 private:
  SyncOptions options_;
};

/// No exchange: each worker trains its own replica (the compute-only ceiling).
class IndependentStrategy : public Strategy {
 public:
  std::string checkpoint_refusal() const override { return "replicas that differ"; }
  void check(const RunNeeds& n) const override {
    DLSCALE_CHECK(!n.averaged_gradient || n.workers == 1,
                  "--noise-scale needs the workers' averaged gradient, and --strategy independent "
                  "averages none");
    DLSCALE_CHECK(!n.whole_average || n.workers == 1,
                  "--noise-final needs the workers' averaged gradient, and --strategy independent "
                  "averages none");
  }
  std::unique_ptr<GradientSync> make_sync(std::vector<torch::Tensor> params,
                                          const SyncContext& c) override {
    // Each worker's own sparse rows, made dense locally: nothing travels.
    return with_sparse_gradients(make_independent_sync(), split_sparse(params, c.sparse).sparse, nullptr);
  }
};

/// A strategy's factory and its record section's key, by its word.
struct Factory {
  std::string name;
  StrategyFactory make;
  std::string section_key;
};

std::deque<Factory>& factory_table() {
  const StrategyFactory bucketed = [](const SyncOptions& o) {
    return std::make_unique<BucketedStrategy>(o);
  };
  static std::deque<Factory> factories{
      {"allreduce", bucketed, ""},
      {"tree", bucketed, ""},
      {"hierarchical", bucketed, ""},
      {"independent", [](const SyncOptions&) { return std::make_unique<IndependentStrategy>(); },
       ""},
      {"ps", make_ps_strategy, "ps"},
      {"zero", make_zero_strategy, "zero"}};
  return factories;
}

}  // namespace

std::unique_ptr<Strategy> make_strategy(const SyncOptions& options) {
  check_sync_options(options);
  for (const Factory& f : factory_table()) {
    if (f.name == options.strategy) return f.make(options);
  }
  throw Error(
      fmt::format("--strategy {} is named but has no factory in this program", options.strategy));
}

StrategyFactory bucketed_strategy() {
  return [](const SyncOptions& o) { return std::make_unique<BucketedStrategy>(o); };
}

void register_strategy(StrategyEntry entry) {
  DLSCALE_CHECK(entry.make != nullptr, "strategy '{}' needs a factory", entry.name.name);
  const std::string name = entry.name.name;
  add_strategy_name(std::move(entry.name));
  factory_table().push_back({name, std::move(entry.make), std::move(entry.section_key)});
}

std::vector<std::string> strategy_section_keys() {
  std::vector<std::string> keys;
  for (const Factory& f : factory_table()) {
    if (!f.section_key.empty()) keys.push_back(f.section_key);
  }
  keys.push_back("sparse");  // --sparse-embeddings' decorator (sparse_sync.cpp), under any strategy
  return keys;
}

}  // namespace dlscale::dp
