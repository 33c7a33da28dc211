#include "libtorch/comm/inproc/inproc_communicator.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "libtorch/comm/reduce_kernels.h"

namespace dlscale::comm {

InProcGroup::InProcGroup(int size) : size_(size), present_(size, false), slots_(size, nullptr) {
  DLSCALE_CHECK(size >= 1, "in-process group size must be >= 1 (got {})", size);
}

void InProcGroup::arrive_and_wait(int rank, const char* op, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!broken_.empty()) throw PeerFailure(fmt::format("rank {}: {} failed: {}", rank, op, broken_));
  const int64_t gen = generation_;
  present_[rank] = true;
  if (++arrived_ == size_) {
    arrived_ = 0;
    ++generation_;
    present_.assign(size_, false);
    cv_.notify_all();
    return;
  }
  const bool done = cv_.wait_for(lock, timeout, [&] { return generation_ != gen || !broken_.empty(); });
  if (generation_ != gen) return;
  if (!done) {
    std::string missing;
    for (int r = 0; r < size_; ++r) {
      if (!present_[r]) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    }
    broken_ = fmt::format("rank {} timed out after {} ms in {} waiting for rank(s) {}", rank,
                          timeout.count(), op, missing);
    cv_.notify_all();
    throw PeerFailure(broken_);
  }
  throw PeerFailure(fmt::format("rank {}: {} failed: {}", rank, op, broken_));
}

void InProcGroup::exchange(int rank, const void* mine,
                           const std::function<void(const std::vector<const void*>&)>& consume,
                           const char* op, std::chrono::milliseconds timeout) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    slots_[rank] = mine;
  }
  arrive_and_wait(rank, op, timeout);
  std::vector<const void*> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    all = slots_;
  }
  consume(all);
  arrive_and_wait(rank, op, timeout);
}

void InProcGroup::abort(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (broken_.empty()) broken_ = why;
  cv_.notify_all();
}

namespace {

/// Puts a message of `bytes` bytes into `posted`: the bytes, or the size
/// mismatch its wait will throw.
void deliver(PostedRecv& posted, const void* data, size_t bytes, int src, int dst) {
  if (bytes == posted.bytes) {
    std::memcpy(posted.into.data_ptr(), data, bytes);
  } else {
    posted.error = fmt::format("rank {}: recv from rank {} got {} bytes, expected {}", dst, src,
                               bytes, posted.bytes);
  }
}

}  // namespace

void InProcGroup::send(int src, int dst, uint32_t tag, const void* data, size_t bytes) {
  std::shared_ptr<PostedRecv> target;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto key = std::make_tuple(src, dst, tag);
    auto& waiting = posted_[key];
    if (waiting.empty()) {
      const auto* p = static_cast<const char*>(data);
      mailboxes_[key].emplace_back(p, p + bytes);
      return;
    }
    target = std::move(waiting.front());
    waiting.pop_front();
  }
  // Out of the lock: the other direction's messages go on meanwhile; the
  // receive's tensor stays alive with `target`.
  deliver(*target, data, bytes, src, dst);
  std::lock_guard<std::mutex> lock(mu_);
  target->filled = true;
  cv_.notify_all();
}

std::shared_ptr<PostedRecv> InProcGroup::post_recv(int src, int dst, uint32_t tag,
                                                   const torch::Tensor& into) {
  auto posted = std::make_shared<PostedRecv>();
  posted->into = into;
  posted->bytes = static_cast<size_t>(into.numel()) * into.element_size();
  std::vector<char> sent;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto key = std::make_tuple(src, dst, tag);
    auto& box = mailboxes_[key];
    if (box.empty()) {
      posted_[key].push_back(posted);
      return posted;
    }
    sent = std::move(box.front());
    box.erase(box.begin());
  }
  deliver(*posted, sent.data(), sent.size(), src, dst);  // nobody else sees it yet
  posted->filled = true;
  return posted;
}

void InProcGroup::wait_recv(int src, int dst, uint32_t tag,
                            const std::shared_ptr<PostedRecv>& posted,
                            std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return posted->filled || !broken_.empty(); });
  if (posted->filled) {
    if (!posted->error.empty()) throw Error(posted->error);
    return;
  }
  if (!broken_.empty()) throw PeerFailure(broken_);
  throw PeerFailure(fmt::format("rank {} timed out after {} ms in recv from rank {} (tag {})", dst,
                                timeout.count(), src, tag));
}

void InProcGroup::cancel_recv(int src, int dst, uint32_t tag,
                              const std::shared_ptr<PostedRecv>& posted) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& waiting = posted_[std::make_tuple(src, dst, tag)];
  waiting.erase(std::remove(waiting.begin(), waiting.end(), posted), waiting.end());
}

InProcCommunicator::InProcCommunicator(std::shared_ptr<InProcGroup> group, int rank,
                                       std::chrono::milliseconds timeout)
    : group_(std::move(group)), rank_(rank), timeout_(timeout) {
  DLSCALE_CHECK(rank >= 0 && rank < group_->size(), "rank {} is outside world size {}", rank,
                group_->size());
}

void InProcCommunicator::allreduce(torch::Tensor& tensor, ReduceOp op) {
  check_comm_tensor(tensor, "allreduce", /*reducible=*/true);
  // Sum every rank's contribution in rank order into a private buffer; only
  // after all ranks have read (second barrier) is the result written back.
  torch::Tensor result = torch::empty_like(tensor);
  const size_t n = static_cast<size_t>(tensor.numel());
  const size_t bytes = n * tensor.element_size();
  const auto dtype = tensor.scalar_type();
  group_->exchange(
      rank_, tensor.data_ptr(),
      [&](const std::vector<const void*>& all) {
        std::memcpy(result.data_ptr(), all[0], bytes);
        for (size_t r = 1; r < all.size(); ++r) {
          sum_into(dtype, result.data_ptr(), result.data_ptr(), all[r], n);
        }
      },
      "allreduce", timeout_);
  tensor.copy_(result);
  if (op == ReduceOp::kAverage) tensor.div_(size());
}

void InProcCommunicator::broadcast(torch::Tensor& tensor, int root) {
  check_comm_tensor(tensor, "broadcast", /*reducible=*/false);
  DLSCALE_CHECK(root >= 0 && root < size(), "broadcast root {} is outside world size {}", root,
                size());
  const size_t bytes = static_cast<size_t>(tensor.numel()) * tensor.element_size();
  group_->exchange(
      rank_, tensor.data_ptr(),
      [&](const std::vector<const void*>& all) {
        if (rank_ != root) std::memcpy(tensor.data_ptr(), all[root], bytes);
      },
      "broadcast", timeout_);
}

void InProcCommunicator::allgather_into(const torch::Tensor& input, torch::Tensor& output) {
  check_comm_chunks(output, input, size(), "allgather", /*reducible=*/false);
  const size_t bytes = static_cast<size_t>(input.numel()) * input.element_size();
  // Each rank writes only its own output, from the others' inputs; an input
  // that is a chunk of its own output is not overwritten before all have read.
  torch::Tensor result = torch::empty_like(output);
  group_->exchange(
      rank_, input.data_ptr(),
      [&](const std::vector<const void*>& all) {
        auto* dst = static_cast<char*>(result.data_ptr());
        for (size_t r = 0; r < all.size(); ++r) std::memcpy(dst + r * bytes, all[r], bytes);
      },
      "allgather", timeout_);
  output.copy_(result);
}

void InProcCommunicator::reduce_scatter(const torch::Tensor& input, torch::Tensor& output,
                                        ReduceOp op) {
  check_comm_chunks(input, output, size(), "reduce_scatter", /*reducible=*/true);
  // Chunk rank_ of every rank's input, summed in rank order.
  const size_t n = static_cast<size_t>(output.numel());
  const size_t bytes = n * output.element_size();
  const auto dtype = output.scalar_type();
  torch::Tensor result = torch::empty_like(output);
  group_->exchange(
      rank_, input.data_ptr(),
      [&](const std::vector<const void*>& all) {
        auto chunk = [&](size_t r) { return static_cast<const char*>(all[r]) + rank_ * bytes; };
        std::memcpy(result.data_ptr(), chunk(0), bytes);
        for (size_t r = 1; r < all.size(); ++r) {
          sum_into(dtype, result.data_ptr(), result.data_ptr(), chunk(r), n);
        }
      },
      "reduce_scatter", timeout_);
  output.copy_(result);
  if (op == ReduceOp::kAverage) output.div_(size());
}

void InProcCommunicator::barrier() {
  group_->exchange(rank_, nullptr, [](const std::vector<const void*>&) {}, "barrier", timeout_);
}

namespace {

/// Sends complete at once (the bytes are copied into a receive posted for
/// them, or into the mailbox); a receive is matched as it is posted or as
/// its message comes, and wait() waits for that.
class InProcRequest : public Request {
 public:
  InProcRequest(InProcGroup* group, torch::Tensor tensor, int src, int dst, uint32_t tag,
                std::chrono::milliseconds timeout)
      : group_(group), src_(src), dst_(dst), tag_(tag), timeout_(timeout) {
    if (group_ != nullptr) posted_ = group_->post_recv(src_, dst_, tag_, tensor);
  }
  ~InProcRequest() override {
    if (group_ != nullptr) group_->cancel_recv(src_, dst_, tag_, posted_);
  }
  void wait() override {
    if (group_ == nullptr) return;
    group_->wait_recv(src_, dst_, tag_, posted_, timeout_);  // a failure leaves it to cancel
    group_ = nullptr;
  }

 private:
  InProcGroup* group_;  // null once done (or for a send)
  int src_;
  int dst_;
  uint32_t tag_;
  std::chrono::milliseconds timeout_;
  std::shared_ptr<PostedRecv> posted_;  // a receive's
};

}  // namespace

std::unique_ptr<Request> InProcCommunicator::isend(const torch::Tensor& tensor, int dst,
                                                   uint32_t tag) {
  check_comm_tensor(tensor, "send", /*reducible=*/false);
  check_tag(tag, "send");
  group_->send(rank_, dst, tag, tensor.data_ptr(), tensor.numel() * tensor.element_size());
  return std::make_unique<InProcRequest>(nullptr, tensor, rank_, dst, tag, timeout_);
}

std::unique_ptr<Request> InProcCommunicator::irecv(torch::Tensor& tensor, int src, uint32_t tag) {
  check_comm_tensor(tensor, "recv", /*reducible=*/false);
  check_tag(tag, "recv");
  return std::make_unique<InProcRequest>(group_.get(), tensor, src, rank_, tag, timeout_);
}

std::unique_ptr<Communicator> InProcCommunicator::split(int color, int key) {
  const SplitPlan plan = plan_split(color, key);
  if (plan.group_rank < 0) return nullptr;
  return std::make_unique<InProcCommunicator>(
      group_->child(plan.split_index, plan.color, plan.group_size), plan.group_rank, timeout_);
}

std::shared_ptr<InProcGroup> InProcGroup::child(int split_index, int color, int size) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& g = children_[{split_index, color}];
  if (!g) g = std::make_shared<InProcGroup>(size);
  return g;
}

}  // namespace dlscale::comm
