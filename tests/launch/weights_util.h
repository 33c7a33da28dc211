#pragma once
// Final weights saved by `dlscale train --save-weights`, for the
// equivalence tests.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/files.h"
#include "process_util.h"

namespace dlscale::testing {

/// Loads the parameter list saved at `path`, then removes the file.
inline std::vector<torch::Tensor> load_weights(const std::string& path) {
  std::vector<torch::Tensor> w;
  torch::load(w, path);
  std::filesystem::remove(path);
  return w;
}

/// Max over parameters of max|a - b| / (atol + rtol |b|): <= 1 means allclose.
inline double closeness(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b,
                        double rtol, double atol) {
  double worst = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    worst =
        std::max(worst, ((a[i] - b[i]).abs() / (atol + rtol * b[i].abs())).max().item<double>());
  }
  return a.size() == b.size() ? worst : 1e30;
}

/// The same parameter list, bit for bit (an empty list matches nothing).
inline bool same_weights(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  if (a.size() != b.size() || a.empty()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!torch::equal(a[i], b[i])) return false;
  }
  return true;
}

struct TrainRun {
  std::vector<torch::Tensor> weights;
  nlohmann::json record;
  std::vector<torch::Tensor> initial;  ///< before the first step, when asked for
};

enum class Initial { kSkip, kSave };

/// Trains with `args`; returns rank 0's final weights and JSON record, and
/// with Initial::kSave the weights before the first step too
/// (--save-initial-weights).
inline TrainRun train(const std::string& args, Initial initial = Initial::kSkip) {
  const std::string w = temp_path("w.pt");
  const std::string j = temp_path("r.json");
  const std::string i = initial == Initial::kSave ? temp_path("i.pt") : "";
  const auto o = run_dlscale(args + " --save-weights " + w + " --json " + j +
                             (i.empty() ? "" : " --save-initial-weights " + i));
  EXPECT_EQ(o.code, 0) << args << "\n" << o.err;
  TrainRun r;
  if (o.code != 0) return r;
  r.weights = load_weights(w);
  if (!i.empty()) r.initial = load_weights(i);
  r.record = nlohmann::json::parse(read_file(j));
  std::filesystem::remove(j);
  return r;
}

/// The bytes `rank` sent per step as the kernel's TCP counters saw them
/// (results.comm.bytes_sent_per_step_tcp) are `expected` plus Gloo's small
/// headers: within 3% and 64 KiB (an acknowledgement may still be in flight
/// when the window closes). Linux reports the counters (tests/core/
/// tcp_counters_test.cpp), so a missing value fails.
inline void expect_tcp_bytes(const nlohmann::json& comm, int rank, double expected) {
  const nlohmann::json& tcp = comm["bytes_sent_per_step_tcp"][rank];
  ASSERT_TRUE(tcp.is_number()) << "rank " << rank << ": no TCP byte count: " << comm.dump();
  EXPECT_GT(tcp.get<double>(), expected * 0.97) << "rank " << rank;
  EXPECT_LT(tcp.get<double>(), expected * 1.03 + 65536) << "rank " << rank;
}

}  // namespace dlscale::testing
