#pragma once
// Strategy `allreduce`: the backend's native allreduce of each bucket (Gloo's
// ring; MPI's own choice of algorithm). Bandwidth-optimal: a ring sends
// 2(p-1)/p x S per rank.
#include <memory>

#include "libtorch/dp/bucket_collective.h"

namespace dlscale::dp {

std::unique_ptr<BucketCollective> make_allreduce_collective(comm::Communicator& comm);

/// Bytes a ring allreduce of `bytes` sends per rank over `ranks` ranks.
double ring_allreduce_bytes(double bytes, int ranks);

}  // namespace dlscale::dp
