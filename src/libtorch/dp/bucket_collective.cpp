#include "libtorch/dp/bucket_collective.h"

#include "core/error.h"
#include "libtorch/dp/allreduce_collective.h"
#include "libtorch/dp/hierarchical_collective.h"
#include "libtorch/dp/tree_collective.h"

namespace dlscale::dp {

std::unique_ptr<BucketCollective> make_bucket_collective(const std::string& strategy,
                                                         comm::Communicator& comm,
                                                         int ranks_per_node,
                                                         const std::string& node_name) {
  if (strategy == "allreduce") return make_allreduce_collective(comm);
  if (strategy == "tree") return std::make_unique<TreeCollective>(comm);
  if (strategy == "hierarchical") {
    return make_hierarchical_collective(comm, ranks_per_node, node_name);
  }
  throw Error(
      fmt::format("unknown collective '{}'; allowed: allreduce, tree, hierarchical", strategy));
}

}  // namespace dlscale::dp
