#include "dp/gradient_sync.h"

#include "core/error.h"
#include "dp/bucketed_sync.h"
#include "dp/independent_sync.h"
#include "dp/ps_sync.h"

namespace dlscale::dp {

std::unique_ptr<GradientSync> make_gradient_sync(const SyncOptions& options,
                                                 std::vector<torch::Tensor> params,
                                                 comm::Communicator* comm,
                                                 const PsSetup* ps) {
  check_sync_options(options);
  if (options.strategy == Strategy::kPs) {
    DLSCALE_CHECK(ps != nullptr, "--strategy ps needs a parameter-server job layout");
    return make_ps_sync(std::move(params), options, *ps);
  }
  if (comm == nullptr || comm->size() == 1 || options.strategy == Strategy::kIndependent) {
    return make_independent_sync();
  }
  auto collective = make_bucket_collective(to_string(options.strategy), *comm,
                                           options.ranks_per_node, options.node_name);
  return std::make_unique<BucketedSync>(std::move(params), *comm, std::move(collective), options);
}

}  // namespace dlscale::dp
