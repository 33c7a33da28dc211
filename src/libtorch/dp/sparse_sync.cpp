#include "libtorch/dp/sparse_sync.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "core/clock.h"

namespace dlscale::dp {

namespace {

class SparseGradSync : public GradientSync {
 public:
  SparseGradSync(std::unique_ptr<GradientSync> dense, std::vector<torch::Tensor> sparse,
                 comm::Communicator* comm)
      : dense_(std::move(dense)), sparse_(std::move(sparse)), comm_(comm), info_(dense_->info()) {
    dense_formula_ = info_.formula_bytes_sent;
    const bool exchanged = comm_ != nullptr && comm_->size() > 1;
    if (exchanged) info_.formula += " + sparse rows: (p-1) x (8 + rows x (8 + 4 x dim)) per table";
    info_.header.push_back(fmt::format("sparse embeddings: {} table(s){}", sparse_.size(),
                                       exchanged ? " exchanged as (indices, values) gathered from every worker"
                                                 : ", their rows made dense locally (no exchange)"));
  }

  const SyncInfo& info() const override { return info_; }
  void begin_step() override { dense_->begin_step(); }
  void need_parameters() override { dense_->need_parameters(); }
  void begin_backward() override { dense_->begin_backward(); }
  void begin_local_backward() override { dense_->begin_local_backward(); }
  void end_local_backward() override { dense_->end_local_backward(); }
  SyncStepStats end_backward() override {
    SyncStepStats stats = dense_->end_backward();
    ++steps_;
    const double start = now_seconds();
    for (const auto& p : sparse_) stats.bytes += exchange(p);
    const double took = now_seconds() - start;
    stats.exposed_seconds += took;
    stats.busy_seconds += took;
    return stats;
  }
  double clip_gradients(const std::vector<torch::Tensor>& params, double max_norm) override {
    return dense_->clip_gradients(params, max_norm);
  }
  void apply_update(torch::optim::Optimizer& optimizer) override { dense_->apply_update(optimizer); }
  StrategyReport report() override;
  /// The dense part's, and the tables' dense gradients (kept across steps).
  HeldBytes held_bytes() const override {
    HeldBytes held = dense_->held_bytes();
    if (held.grads < 0) return held;  // the trainer counts one .grad per parameter
    for (const auto& [unused, t] : tables_) {
      held.grads += t.grad.numel() * static_cast<int64_t>(t.grad.element_size());
    }
    return held;
  }
  const torch::optim::Optimizer* own_optimizer() const override { return dense_->own_optimizer(); }
  std::vector<torch::Tensor> own_parameters() const override { return dense_->own_parameters(); }
  std::vector<torch::Tensor> assemble_pieces(const std::vector<torch::Tensor>& pieces) override {
    return dense_->assemble_pieces(pieces);
  }

 private:
  struct Table {
    torch::Tensor grad;     // its dense gradient, kept across steps
    torch::Tensor touched;  // the rows last written into it (undefined: none yet)
  };

  /// Gathers `p`'s rows from every worker into its dense .grad; returns the
  /// bytes this worker handed to the collectives.
  int64_t exchange(const torch::Tensor& p);
  /// `p`'s table: its dense gradient zero again and made p's .grad.
  Table& dense_rows(const torch::Tensor& p);

  std::unique_ptr<GradientSync> dense_;
  std::vector<torch::Tensor> sparse_;
  comm::Communicator* comm_;
  SyncInfo info_;
  double dense_formula_ = 0;
  std::map<const void*, Table> tables_;
  double sent_ = 0;      // bytes sent by the formula over the steps so far
  int64_t handed_ = 0;   // bytes gathered over the steps so far
  int64_t rows_ = 0;     // rows this worker contributed over the steps so far
  int64_t steps_ = 0;
};

SparseGradSync::Table& SparseGradSync::dense_rows(const torch::Tensor& p) {
  // One dense gradient per table, kept across steps: only last step's rows
  // are zeroed (a fresh zeroed table per step costs a pass over all of it).
  auto [it, first] = tables_.try_emplace(p.unsafeGetTensorImpl());
  Table& t = it->second;
  if (first) t.grad = torch::zeros_like(p);
  if (t.touched.defined()) t.grad.view({p.size(0), -1}).index_fill_(0, t.touched, 0.0);
  p.mutable_grad() = t.grad;
  return t;
}

int64_t SparseGradSync::exchange(const torch::Tensor& p) {
  torch::NoGradGuard no_grad;
  const int workers = comm_ != nullptr ? comm_->size() : 1;
  torch::Tensor g = p.grad();
  const int64_t dim = p.numel() / std::max<int64_t>(p.size(0), 1);
  torch::Tensor indices = torch::zeros({0}, torch::dtype(torch::kInt64).device(p.device()));
  torch::Tensor values = torch::zeros({0, dim}, p.options());
  if (g.defined()) {
    if (g.is_sparse()) {
      g = g.coalesce();  // one row per looked-up index
      indices = g.indices().reshape({-1});
      values = g.values().reshape({-1, dim});
    } else {  // dense already (a table used elsewhere too): its rows, all of them
      indices = torch::arange(p.size(0), indices.options());
      values = g.reshape({-1, dim});
    }
  }
  const int64_t rows = indices.numel();
  rows_ += rows;
  Table& table = dense_rows(p);
  const torch::Tensor flat = table.grad.view({-1, dim});
  if (workers == 1) {
    flat.index_add_(0, indices, values);
    table.touched = indices;
    return 0;
  }
  // Every worker's row count, then everyone's rows padded to the largest.
  const torch::Tensor counts = comm_->allgather(torch::tensor({rows}, torch::kInt64)).reshape({-1});
  const int64_t most = counts.max().item<int64_t>();
  if (most == 0) {  // no worker looked a row up: nothing to gather (every worker sees that)
    table.touched = indices;
    sent_ += (workers - 1.0) * 8.0;
    return 8;
  }
  torch::Tensor my_indices = torch::zeros({most}, indices.options());
  torch::Tensor my_values = torch::zeros({most, dim}, values.options());
  my_indices.narrow(0, 0, rows).copy_(indices);
  my_values.narrow(0, 0, rows).copy_(values);
  torch::Tensor all_indices = torch::empty({workers * most}, indices.options());
  torch::Tensor all_values = torch::empty({workers * most, dim}, values.options());
  comm_->allgather_into(my_indices, all_indices);
  comm_->allgather_into(my_values, all_values);
  all_values.div_(workers);  // the mean: only the rows, not the table
  std::vector<torch::Tensor> touched;
  for (int r = 0; r < workers; ++r) {  // the same order on every worker
    const int64_t n = counts[r].item<int64_t>();
    touched.push_back(all_indices.narrow(0, r * most, n));
    flat.index_add_(0, touched.back(), all_values.narrow(0, r * most, n));
  }
  table.touched = torch::cat(touched);
  // A ring allgather sends p-1 of the p chunks: the count, the indices and
  // the values.
  const double sent = (workers - 1.0) * (8.0 + static_cast<double>(most) * (8.0 + 4.0 * dim));
  sent_ += sent;
  const int64_t handed = workers * (8 + most * (8 + 4 * dim));  // the gathered bytes
  handed_ += handed;
  // The record's figures are per step: the averages so far. The rows are
  // one more "bucket" of the exchange, after the dense ones.
  const double steps = static_cast<double>(std::max<int64_t>(steps_, 1));
  info_.formula_bytes_sent = dense_formula_ + sent_ / steps;
  info_.bucket_bytes = dense_->info().bucket_bytes;
  info_.bucket_bytes.push_back(static_cast<int64_t>(static_cast<double>(handed_) / steps));
  return handed;
}

StrategyReport SparseGradSync::report() {
  StrategyReport r = dense_->report();
  const double steps = static_cast<double>(std::max<int64_t>(steps_, 1));
  nlohmann::json section = {{"tables", sparse_.size()},
                            {"rows_per_step", static_cast<double>(rows_) / steps},
                            {"bytes_sent_per_step", sent_ / steps}};
  if (r.key.empty()) {
    r.key = "sparse";
    r.section = section;
  } else {
    r.section["sparse"] = section;
  }
  r.summary.push_back(fmt::format(
      "sparse embeddings: {} table(s), {:.0f} row(s) per step from this worker, {:.2f} MB sent per step",
      sparse_.size(), static_cast<double>(rows_) / steps, sent_ / steps / 1e6));
  return r;
}

}  // namespace

std::unique_ptr<GradientSync> with_sparse_gradients(std::unique_ptr<GradientSync> dense,
                                                    std::vector<torch::Tensor> sparse,
                                                    comm::Communicator* comm) {
  if (sparse.empty()) return dense;
  return std::make_unique<SparseGradSync>(std::move(dense), std::move(sparse), comm);
}

SplitParams split_sparse(const std::vector<torch::Tensor>& params, const std::vector<size_t>& sparse) {
  SplitParams out;
  for (size_t k = 0; k < params.size(); ++k) {
    (std::find(sparse.begin(), sparse.end(), k) != sparse.end() ? out.sparse : out.dense).push_back(params[k]);
  }
  return out;
}

}  // namespace dlscale::dp
