#pragma once
// Strategy `tree` (Caffe's P2PSync): each bucket is summed up a binary tree
// to rank 0 (rank r's children are 2r+1 and 2r+2) and the sum is sent back
// down the same tree, all over send/recv. Rank r sends S to its parent
// (r > 0) and S to each child: at most 3 x S, root 2 x S, leaves S; the root
// link carries 2 x S each way, so it does not scale like a ring.
#include <map>
#include <memory>
#include <utility>

#include "libtorch/dp/bucket_collective.h"

namespace dlscale::dp {

class TreeCollective : public BucketCollective {
 public:
  /// `comm` must outlive this.
  explicit TreeCollective(comm::Communicator& comm) : comm_(comm) {}
  std::string name() const override { return "tree"; }
  void sum(torch::Tensor& data, uint32_t tag) override;
  double bytes_sent(double bytes) const override;
  std::string formula() const override { return "([r>0] + children(r)) x S"; }

  /// Rank 0 ends with the sum; other ranks' `data` is left partially summed.
  void reduce_to_root(torch::Tensor& data, uint32_t tag);
  /// Every rank ends with rank 0's `data`.
  void broadcast_from_root(torch::Tensor& data, uint32_t tag);

 private:
  torch::Tensor scratch(int child, const torch::Tensor& like);

  comm::Communicator& comm_;
  std::map<std::pair<int, int64_t>, torch::Tensor> scratch_;  // (child slot, bytes) -> buffer
};

/// Children of `rank` in a binary tree of `size` ranks rooted at 0.
int tree_children(int rank, int size);

}  // namespace dlscale::dp
