#pragma once
// Strategy `hierarchical` (Horovod's / NCCL's two-level scheme): ranks are
// grouped by node; each bucket is summed inside the node to its leader (the
// node's lowest rank) up a binary tree, the leaders allreduce among
// themselves, and each leader sends the result back down its node's tree.
// Inter-node traffic is that of an allreduce among the k leaders,
// 2(k-1)/k x S per leader instead of per rank.
#include <memory>
#include <string>

#include "libtorch/dp/bucket_collective.h"

namespace dlscale::dp {

/// Collective over `comm`: splits it into node groups (r / ranks_per_node
/// when ranks_per_node > 0, else ranks with equal `node_name`) and a group of
/// the node leaders.
std::unique_ptr<BucketCollective> make_hierarchical_collective(comm::Communicator& comm,
                                                               int ranks_per_node,
                                                               const std::string& node_name);

}  // namespace dlscale::dp
