// --strategy zero as a Strategy (libtorch/dp/strategy.h): what sharding cannot do
// for a run, and the worker's ZeroSync.
#include "core/error.h"
#include "libtorch/dp/independent_sync.h"
#include "libtorch/dp/strategy.h"
#include "libtorch/dp/zero_sync.h"

namespace dlscale::dp {
namespace {

class ZeroStrategy : public Strategy {
 public:
  explicit ZeroStrategy(const SyncOptions& options) : options_(options) {}

  void check(const RunNeeds& n) const override {
    DLSCALE_CHECK(!n.sparse_gradients,
                  "--sparse-embeddings sends an embedding's rows, which --strategy zero cannot "
                  "reduce-scatter into its flat shards: use --strategy allreduce, tree or hierarchical");
    DLSCALE_CHECK(!n.loss_scaling,
                  "--amp fp16 unscales and checks whole gradients, of which --strategy zero keeps "
                  "a shard: use --amp bf16 with --strategy zero");
    DLSCALE_CHECK(!n.whole_average || n.workers == 1,
                  "--noise-final needs the whole averaged gradient on every worker, of which "
                  "--strategy zero keeps a shard: use --strategy allreduce, tree or hierarchical");
  }

  std::string checkpoint_refusal() const override {
    return "optimizer state sharded over the workers";
  }

  std::unique_ptr<GradientSync> make_sync(std::vector<torch::Tensor> params,
                                          const SyncContext& c) override {
    // One worker holds every shard: nothing to exchange.
    if (c.comm == nullptr || c.comm->size() == 1) return make_independent_sync();
    return make_zero_sync(std::move(params), *c.comm, options_, c);
  }

 private:
  SyncOptions options_;
};

}  // namespace

std::unique_ptr<Strategy> make_zero_strategy(const SyncOptions& options) {
  return std::make_unique<ZeroStrategy>(options);
}

}  // namespace dlscale::dp
