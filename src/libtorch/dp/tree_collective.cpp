#include "libtorch/dp/tree_collective.h"

#include <vector>

#include "libtorch/comm/reduce_kernels.h"

namespace dlscale::dp {

int tree_children(int rank, int size) {
  return (2 * rank + 1 < size ? 1 : 0) + (2 * rank + 2 < size ? 1 : 0);
}

double TreeCollective::bytes_sent(double bytes) const {
  const int r = comm_.rank();
  return ((r > 0 ? 1 : 0) + tree_children(r, comm_.size())) * bytes;
}

torch::Tensor TreeCollective::scratch(int child, const torch::Tensor& like) {
  const int64_t bytes = like.numel() * like.element_size();
  torch::Tensor& t = scratch_[{child, bytes}];
  if (!t.defined() || t.scalar_type() != like.scalar_type()) t = torch::empty_like(like);
  return t;
}

void TreeCollective::reduce_to_root(torch::Tensor& data, uint32_t tag) {
  const int r = comm_.rank();
  const int p = comm_.size();
  // Both children's messages are received concurrently, then added in child
  // order, so the sum's rounding is the same whatever arrives first.
  std::vector<torch::Tensor> bufs;
  std::vector<std::unique_ptr<comm::Request>> pending;
  for (int c = 0; c < tree_children(r, p); ++c) {
    bufs.push_back(scratch(c, data));
    pending.push_back(comm_.irecv(bufs.back(), 2 * r + 1 + c, tag));
  }
  for (size_t c = 0; c < pending.size(); ++c) {
    pending[c]->wait();
    if (data.is_cpu()) {
      comm::sum_into(data.scalar_type(), data.data_ptr(), data.data_ptr(), bufs[c].data_ptr(),
                     static_cast<size_t>(data.numel()));
    } else {
      data.add_(bufs[c]);  // a GPU bucket: half types add in their own precision there
    }
  }
  if (r > 0) comm_.send(data, (r - 1) / 2, tag);
}

void TreeCollective::broadcast_from_root(torch::Tensor& data, uint32_t tag) {
  const int r = comm_.rank();
  const int p = comm_.size();
  if (r > 0) comm_.recv(data, (r - 1) / 2, tag);
  std::vector<std::unique_ptr<comm::Request>> pending;
  for (int c = 0; c < tree_children(r, p); ++c)
    pending.push_back(comm_.isend(data, 2 * r + 1 + c, tag));
  for (auto& req : pending) req->wait();
}

void TreeCollective::sum(torch::Tensor& data, uint32_t tag) {
  if (comm_.size() == 1) return;
  // Up and down use distinct tags: a rank's parent can start sending the
  // next bucket's sum down while this rank still sends up.
  reduce_to_root(data, 2 * tag);
  broadcast_from_root(data, 2 * tag + 1);
}

}  // namespace dlscale::dp
