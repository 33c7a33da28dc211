// The facts a trainer gathers from every rank at the end of a run: phase
// times, bytes sent, the replicas' checksums, memory (libtorch/train/trainer.h).
#include <algorithm>

#include "libtorch/compute/phase_clock.h"
#include "core/hash.h"
#include "core/memory.h"
#include "libtorch/train/optimizer.h"
#include "libtorch/train/trainer.h"

namespace dlscale::train {

void Trainer::gather_rank_times() {
  // Every rank's phase times, [world, steps, phases]; each step is then as
  // slow as its slowest rank, phase by phase.
  const auto steps = static_cast<int64_t>(result_.steps.size());
  torch::Tensor mine = torch::empty({steps, static_cast<int64_t>(kNumPhases)}, torch::kFloat64);
  auto acc = mine.accessor<double, 2>();
  for (int64_t s = 0; s < steps; ++s) {
    for (size_t p = 0; p < kNumPhases; ++p) acc[s][p] = phase_seconds(result_.steps[s].times, p);
  }
  const torch::Tensor all = worker_.comm->allgather(mine);
  result_.rank_median_times.clear();
  for (int r = 0; r < worker_.world_size; ++r) {
    std::vector<StepRecord> rank_steps = result_.steps;
    const torch::Tensor rank_times = all[r];
    auto ra = rank_times.accessor<double, 2>();
    for (int64_t s = 0; s < steps; ++s) {
      StepTimes& t = rank_steps[s].times;
      t = {ra[s][0], ra[s][1], ra[s][2], ra[s][3], ra[s][4], ra[s][5]};
    }
    result_.rank_median_times.push_back(median_phase_times(rank_steps));
  }
  const torch::Tensor worst = std::get<0>(all.max(0));
  auto wa = worst.accessor<double, 2>();
  for (int64_t s = 0; s < steps; ++s) {
    result_.steps[s].times = {wa[s][0], wa[s][1], wa[s][2], wa[s][3], wa[s][4], wa[s][5]};
  }
}

namespace {

/// A checksum of every parameter's bytes (core/hash.h): equal on two ranks
/// iff (barring a 2^-64 collision) their replicas are bit-identical.
int64_t parameter_checksum(const std::vector<torch::Tensor>& params) {
  uint64_t h = kFnv1aOffset;
  for (const auto& p : params) {
    const torch::Tensor c = p.detach().contiguous().cpu();
    h = buffer_checksum(c.data_ptr(), static_cast<size_t>(c.numel()) * c.element_size(), h);
  }
  return static_cast<int64_t>(h);
}

}  // namespace

void Trainer::gather_comm_facts(double tcp_bytes, int64_t tcp_steps) {
  // Per rank: bytes sent per step by the formula and by the kernel's TCP
  // counters (-1 when unknown), and the parameter checksum (nccl-tests'
  // #wrong idea: do the replicas still agree after the run?).
  torch::Tensor mine = torch::tensor(
      {sync_->info().formula_bytes_sent, tcp_bytes >= 0 ? tcp_bytes / tcp_steps : -1.0},
      torch::kFloat64);
  const torch::Tensor all = worker_.comm->allgather(mine);
  torch::Tensor sum = torch::tensor({parameter_checksum(model_->parameters())}, torch::kInt64);
  const torch::Tensor sums = worker_.comm->allgather(sum);
  CommSummary& c = result_.comm;
  c.formula_bytes_sent.clear();
  c.tcp_bytes_sent.clear();
  c.replicas_identical = true;
  for (int r = 0; r < worker_.world_size; ++r) {
    c.formula_bytes_sent.push_back(all[r][0].item<double>());
    c.tcp_bytes_sent.push_back(all[r][1].item<double>());
    c.replicas_identical = c.replicas_identical && sums[r][0].item<int64_t>() == sums[0][0].item<int64_t>();
  }
}

RankMemory Trainer::account_memory() const {
  // What the strategy holds where it holds it; else the model's tensors
  // (one gradient per parameter, as .grad keeps them between steps).
  int64_t model_bytes = 0;
  for (const auto& p : model_->parameters()) model_bytes += p.numel() * static_cast<int64_t>(p.element_size());
  const dp::HeldBytes held = sync_->held_bytes();
  RankMemory m;
  m.params = held.params >= 0 ? held.params : model_bytes;
  m.grads = held.grads >= 0 ? held.grads : model_bytes;
  const torch::optim::Optimizer* own = sync_->own_optimizer();
  m.optimizer = optimizer_state_bytes(own != nullptr ? *own : *optimizer_);
  m.peak_rss = peak_resident_bytes();
  if (device_.is_cuda()) m.device_peak = cuda_peak_allocated_bytes(device_.index());
  return m;
}

void Trainer::gather_memory() {
  const RankMemory mine = account_memory();
  if (worker_.world_size == 1) {
    result_.memory = {mine};
    return;
  }
  const torch::Tensor all = worker_.comm->allgather(
      torch::tensor({mine.params, mine.grads, mine.optimizer, mine.peak_rss, mine.device_peak},
                    torch::kInt64));
  result_.memory.clear();
  for (int r = 0; r < worker_.world_size; ++r) {
    result_.memory.push_back({all[r][0].item<int64_t>(), all[r][1].item<int64_t>(),
                              all[r][2].item<int64_t>(), all[r][3].item<int64_t>(),
                              all[r][4].item<int64_t>()});
  }
}

}  // namespace dlscale::train
