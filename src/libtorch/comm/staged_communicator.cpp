#include "libtorch/comm/staged_communicator.h"

#include <utility>

namespace dlscale::comm {
namespace {

/// Completes a staged receive: the data lands in the native copy and is
/// copied into the caller's tensor once the backend's request is done. A
/// staged send keeps its copy alive until then.
class StagedRequest : public Request {
 public:
  /// `target` undefined: a send.
  StagedRequest(std::unique_ptr<Request> inner, torch::Tensor staged, torch::Tensor target)
      : inner_(std::move(inner)), staged_(std::move(staged)), target_(std::move(target)) {}
  void wait() override {
    inner_->wait();
    if (target_.defined()) target_.copy_(staged_);
    target_ = torch::Tensor();
  }

 private:
  std::unique_ptr<Request> inner_;
  torch::Tensor staged_;
  torch::Tensor target_;  ///< shares the caller's storage
};

}  // namespace

StagedCommunicator::StagedCommunicator(std::unique_ptr<Communicator> inner)
    : inner_(std::move(inner)), native_(inner_->device()) {}

torch::Tensor StagedCommunicator::to_native(const torch::Tensor& t) {
  if (!t.defined() || t.device() == native_) return t;
  staged_bytes_ += t.numel() * static_cast<int64_t>(t.element_size());
  return t.to(native_, /*non_blocking=*/false, /*copy=*/true).contiguous();
}

void StagedCommunicator::allreduce(torch::Tensor& tensor, ReduceOp op) {
  torch::Tensor native = to_native(tensor);
  inner_->allreduce(native, op);
  if (!native.is_same(tensor)) tensor.copy_(native);
}

void StagedCommunicator::broadcast(torch::Tensor& tensor, int root) {
  torch::Tensor native = to_native(tensor);
  inner_->broadcast(native, root);
  if (!native.is_same(tensor)) tensor.copy_(native);
}

void StagedCommunicator::allgather_into(const torch::Tensor& input, torch::Tensor& output) {
  torch::Tensor native_out = to_native(output);
  // In place stays in place: the input is then the native output's chunk.
  const bool in_place = is_own_chunk(output, input, rank());
  const torch::Tensor native_in =
      in_place ? native_out.view(-1).narrow(0, rank() * input.numel(), input.numel()) : to_native(input);
  inner_->allgather_into(native_in, native_out);
  if (!native_out.is_same(output)) output.copy_(native_out);
}

void StagedCommunicator::reduce_scatter(const torch::Tensor& input, torch::Tensor& output,
                                        ReduceOp op) {
  const torch::Tensor native_in = to_native(input);
  torch::Tensor native_out = to_native(output);
  inner_->reduce_scatter(native_in, native_out, op);
  if (!native_out.is_same(output)) output.copy_(native_out);
}

std::unique_ptr<Request> StagedCommunicator::isend(const torch::Tensor& tensor, int dst,
                                                   uint32_t tag) {
  torch::Tensor native = to_native(tensor);
  auto inner = inner_->isend(native, dst, tag);
  if (native.is_same(tensor)) return inner;
  return std::make_unique<StagedRequest>(std::move(inner), native, torch::Tensor());
}

std::unique_ptr<Request> StagedCommunicator::irecv(torch::Tensor& tensor, int src, uint32_t tag) {
  torch::Tensor native = to_native(tensor);
  if (native.is_same(tensor)) return inner_->irecv(tensor, src, tag);
  auto inner = inner_->irecv(native, src, tag);
  return std::make_unique<StagedRequest>(std::move(inner), native, tensor);
}

std::unique_ptr<Communicator> StagedCommunicator::split(int color, int key) {
  std::unique_ptr<Communicator> child = inner_->split(color, key);
  if (!child) return nullptr;
  return std::make_unique<StagedCommunicator>(std::move(child));
}

}  // namespace dlscale::comm
