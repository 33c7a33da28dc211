#pragma once
// --sparse-embeddings (docs/strategies.md, "Sparse embedding gradients"): an
// embedding table's gradient holds only the rows a batch looked up. Instead
// of a dense allreduce of the whole table, each worker coalesces its rows
// and every worker gathers every worker's (indices, values) (allgather, as
// PyTorch DDP does over Gloo), sums them into a dense gradient and divides
// by the workers. The other parameters go through the strategy's own sync.
#include <memory>
#include <vector>

#include "libtorch/dp/gradient_sync.h"

namespace dlscale::dp {

/// Wraps `dense` (the sync of every parameter but `sparse`) so that the
/// `sparse` parameters' sparse gradients are gathered over `comm` (null:
/// one worker, made dense locally) after backward; each ends as a dense
/// .grad holding the mean over the workers.
std::unique_ptr<GradientSync> with_sparse_gradients(std::unique_ptr<GradientSync> dense,
                                                    std::vector<torch::Tensor> sparse,
                                                    comm::Communicator* comm);

/// `params` without those whose indices are in `sparse`, and those.
struct SplitParams {
  std::vector<torch::Tensor> dense, sparse;
};
SplitParams split_sparse(const std::vector<torch::Tensor>& params, const std::vector<size_t>& sparse);

}  // namespace dlscale::dp
