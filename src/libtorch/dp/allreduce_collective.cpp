#include "libtorch/dp/allreduce_collective.h"

namespace dlscale::dp {
namespace {

class AllreduceCollective : public BucketCollective {
 public:
  explicit AllreduceCollective(comm::Communicator& comm) : comm_(comm) {}
  std::string name() const override { return "allreduce"; }
  void sum(torch::Tensor& data, uint32_t /*tag*/) override {
    comm_.allreduce(data, comm::ReduceOp::kSum);
  }
  double bytes_sent(double bytes) const override {
    return ring_allreduce_bytes(bytes, comm_.size());
  }
  std::string formula() const override { return "2(p-1)/p x S"; }

 private:
  comm::Communicator& comm_;
};

}  // namespace

double ring_allreduce_bytes(double bytes, int ranks) {
  return ranks > 1 ? 2.0 * (ranks - 1) / ranks * bytes : 0.0;
}

std::unique_ptr<BucketCollective> make_allreduce_collective(comm::Communicator& comm) {
  return std::make_unique<AllreduceCollective>(comm);
}

}  // namespace dlscale::dp
