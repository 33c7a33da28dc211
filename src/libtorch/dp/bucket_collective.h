#pragma once
// The collective a bucketed strategy supplies for one bucket: after sum(),
// every rank holds the elementwise sum over all ranks. Bucketing, overlap
// and compression (libtorch/dp/bucketed_sync.h) are shared; only this differs between
// allreduce, tree and hierarchical. `dlscale commbench` times the same
// objects, so it measures the collectives exactly as training uses them.
#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "libtorch/comm/communicator.h"

namespace dlscale::dp {

class BucketCollective {
 public:
  virtual ~BucketCollective() = default;
  /// "allreduce" | "tree" | "hierarchical".
  virtual std::string name() const = 0;
  /// In place: every rank ends with the sum over ranks of `data` (a contiguous
  /// CPU tensor of float32, float16 or bfloat16). `tag` (< 2^20) tells apart
  /// the buckets of one step. Throws dlscale::PeerFailure on a peer failure.
  virtual void sum(torch::Tensor& data, uint32_t tag) = 0;
  /// Bytes this rank sends to sum a tensor of `bytes` bytes, by the
  /// algorithm's formula (docs/strategies.md).
  virtual double bytes_sent(double bytes) const = 0;
  /// That formula as text, with S the tensor's bytes and p the ranks.
  virtual std::string formula() const = 0;
  /// Node groups (hierarchical), else 0.
  virtual int nodes() const { return 0; }
};

/// Makes a bucket collective over `comm` (which outlives it), with the
/// node grouping hierarchical uses (ranks_per_node, node_name).
using CollectiveFactory = std::function<std::unique_ptr<BucketCollective>(
    comm::Communicator& comm, int ranks_per_node, const std::string& node_name)>;

/// Adds a bucket collective at run time, by the word of the bucketed
/// strategy that uses it (registered with dp::bucketed_strategy(), its
/// StrategyName marked bucketed); throws dlscale::Error when the word is
/// taken. bucket_collective.cpp's table holds the shipped ones.
void register_bucket_collective(const std::string& name, CollectiveFactory make);

/// The collective of `strategy` ("allreduce", "tree", "hierarchical") over
/// `comm`, which must outlive it. Hierarchical groups ranks into nodes:
/// r / ranks_per_node when ranks_per_node > 0, else by equal `node_name`.
/// Collective over `comm` (hierarchical splits it).
std::unique_ptr<BucketCollective> make_bucket_collective(const std::string& strategy,
                                                         comm::Communicator& comm,
                                                         int ranks_per_node,
                                                         const std::string& node_name);

}  // namespace dlscale::dp
