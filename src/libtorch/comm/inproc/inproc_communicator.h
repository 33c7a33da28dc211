#pragma once
// Ranks as threads of one process, sharing an InProcGroup: the backend of the
// multi-rank unit tests. Reductions add contributions in rank order, so every
// rank gets bit-identical results.
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "libtorch/comm/communicator.h"

namespace dlscale::comm {

/// A posted receive. Matched in the order posted: to a message already in
/// the mailbox as it is posted, else to the next one sent, which the sender
/// copies straight into `into` (one copy, no buffer in between).
struct PostedRecv {
  torch::Tensor into;
  size_t bytes = 0;
  bool filled = false;  ///< with the group's lock
  std::string error;    ///< the message's size was not `bytes`
};

/// State shared by the ranks of one in-process group. Thread-safe.
class InProcGroup {
 public:
  explicit InProcGroup(int size);
  int size() const { return size_; }

  /// Collective step: publishes `mine` for `rank`, waits for every rank, calls
  /// `consume(all)` with every rank's pointer (rank order), then waits until
  /// every rank has consumed, so pointers stay valid throughout.
  void exchange(int rank, const void* mine, const std::function<void(const std::vector<const void*>&)>& consume,
                const char* op, std::chrono::milliseconds timeout);

  /// Sends `bytes` bytes at `data`: straight into the first receive still
  /// waiting for (src, dst, tag), else into the mailbox, copied.
  void send(int src, int dst, uint32_t tag, const void* data, size_t bytes);
  /// A receive into `into`: filled at once from the mailbox's first message
  /// for it, else left for send() to fill.
  std::shared_ptr<PostedRecv> post_recv(int src, int dst, uint32_t tag, const torch::Tensor& into);
  /// Waits until `posted` is filled; throws dlscale::PeerFailure on a
  /// timeout or a broken group, and dlscale::Error when the message's size
  /// is not the receive's.
  void wait_recv(int src, int dst, uint32_t tag, const std::shared_ptr<PostedRecv>& posted,
                 std::chrono::milliseconds timeout);
  /// A receive given up before its message came (its request gone unwaited).
  void cancel_recv(int src, int dst, uint32_t tag, const std::shared_ptr<PostedRecv>& posted);
  /// Breaks the group: every rank waiting or about to wait in it throws
  /// dlscale::PeerFailure(`why`) at once.
  void abort(const std::string& why);

  /// The group of colour `color` made by split number `split_index`; the
  /// first rank to ask creates it with `size` ranks.
  std::shared_ptr<InProcGroup> child(int split_index, int color, int size);

 private:
  void arrive_and_wait(int rank, const char* op, std::chrono::milliseconds timeout);

  const int size_;
  std::mutex mu_;
  std::condition_variable cv_;
  int64_t generation_ = 0;
  int arrived_ = 0;
  std::vector<bool> present_;
  std::vector<const void*> slots_;
  std::string broken_;  // set when a rank timed out: the group cannot continue
  std::map<std::tuple<int, int, uint32_t>, std::vector<std::vector<char>>> mailboxes_;
  std::map<std::tuple<int, int, uint32_t>, std::deque<std::shared_ptr<PostedRecv>>> posted_;
  std::map<std::pair<int, int>, std::shared_ptr<InProcGroup>> children_;
};

class InProcCommunicator : public Communicator {
 public:
  InProcCommunicator(std::shared_ptr<InProcGroup> group, int rank,
                     std::chrono::milliseconds timeout);
  int rank() const override { return rank_; }
  int size() const override { return group_->size(); }
  std::string backend() const override { return "inproc"; }
  std::chrono::milliseconds timeout() const override { return timeout_; }
  void allreduce(torch::Tensor& tensor, ReduceOp op) override;
  void broadcast(torch::Tensor& tensor, int root) override;
  void allgather_into(const torch::Tensor& input, torch::Tensor& output) override;
  void reduce_scatter(const torch::Tensor& input, torch::Tensor& output, ReduceOp op) override;
  void barrier() override;
  std::unique_ptr<Request> isend(const torch::Tensor& tensor, int dst, uint32_t tag) override;
  std::unique_ptr<Request> irecv(torch::Tensor& tensor, int src, uint32_t tag) override;
  std::unique_ptr<Communicator> split(int color, int key) override;

 private:
  std::shared_ptr<InProcGroup> group_;
  int rank_;
  std::chrono::milliseconds timeout_;
};

}  // namespace dlscale::comm
