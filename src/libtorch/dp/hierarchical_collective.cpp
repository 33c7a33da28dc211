#include "libtorch/dp/hierarchical_collective.h"

#include "libtorch/comm/agreement.h"
#include "core/error.h"
#include "libtorch/dp/allreduce_collective.h"
#include "libtorch/dp/tree_collective.h"

namespace dlscale::dp {
namespace {

class HierarchicalCollective : public BucketCollective {
 public:
  HierarchicalCollective(comm::Communicator& comm, int node) {
    local_ = comm.split(node, comm.rank());
    leaders_ = comm.split(local_->rank() == 0 ? 0 : -1, comm.rank());
    // Every rank learns the number of nodes (leaders only have the group).
    torch::Tensor count = torch::tensor({local_->rank() == 0 ? 1.0f : 0.0f});
    comm.allreduce(count, comm::ReduceOp::kSum);
    nodes_ = static_cast<int>(count.item<float>());
    tree_ = std::make_unique<TreeCollective>(*local_);
  }
  std::string name() const override { return "hierarchical"; }
  int nodes() const override { return nodes_; }

  void sum(torch::Tensor& data, uint32_t tag) override {
    tree_->reduce_to_root(data, 2 * tag);
    if (leaders_) leaders_->allreduce(data, comm::ReduceOp::kSum);
    tree_->broadcast_from_root(data, 2 * tag + 1);
  }
  double bytes_sent(double bytes) const override {
    return tree_->bytes_sent(bytes) + (leaders_ ? ring_allreduce_bytes(bytes, nodes_) : 0.0);
  }
  std::string formula() const override {
    return "([l>0] + children(l)) x S in the node, + 2(k-1)/k x S on leaders";
  }

 private:
  std::unique_ptr<comm::Communicator> local_;
  std::unique_ptr<comm::Communicator> leaders_;  // null on non-leaders
  std::unique_ptr<TreeCollective> tree_;
  int nodes_ = 1;
};

/// This rank's node index: the first rank of equal name, as a colour.
int node_color(comm::Communicator& comm, int ranks_per_node, const std::string& node_name) {
  if (ranks_per_node > 0) return comm.rank() / ranks_per_node;
  const std::vector<std::string> names = comm::allgather_strings(comm, node_name);
  for (int r = 0; r < comm.size(); ++r) {
    if (names[static_cast<size_t>(r)] == node_name) return r;
  }
  DLSCALE_ASSERT(false);
  return 0;
}

}  // namespace

std::unique_ptr<BucketCollective> make_hierarchical_collective(comm::Communicator& comm,
                                                               int ranks_per_node,
                                                               const std::string& node_name) {
  DLSCALE_CHECK(ranks_per_node >= 0, "--ranks-per-node must be >= 0 (got {}; 0 = group by host)",
                ranks_per_node);
  return std::make_unique<HierarchicalCollective>(comm,
                                                  node_color(comm, ranks_per_node, node_name));
}

}  // namespace dlscale::dp
