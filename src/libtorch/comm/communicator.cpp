#include "libtorch/comm/communicator.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "core/error.h"

namespace dlscale::comm {

void check_comm_tensor(const torch::Tensor& t, const char* op, bool reducible,
                       const torch::Device& device) {
  DLSCALE_CHECK(t.defined(), "{}: tensor is undefined", op);
  DLSCALE_CHECK(t.device() == device, "{}: tensor is on {}, this backend needs {} tensors", op,
                t.device().str(), device.is_cpu() ? "CPU" : device.str());
  DLSCALE_CHECK(t.is_contiguous(), "{}: tensor must be contiguous", op);
  if (reducible) {
    const auto d = t.scalar_type();
    DLSCALE_CHECK(d == torch::kFloat32 || d == torch::kFloat16 || d == torch::kBFloat16,
                  "{}: dtype {} cannot be reduced; allowed: float32, float16, bfloat16", op,
                  c10::toString(d));
  }
}

void check_comm_chunks(const torch::Tensor& whole, const torch::Tensor& chunk, int ranks,
                       const char* op, bool reducible, const torch::Device& device) {
  check_comm_tensor(whole, op, reducible, device);
  check_comm_tensor(chunk, op, reducible, device);
  DLSCALE_CHECK(whole.scalar_type() == chunk.scalar_type(), "{}: dtypes differ ({} and {})", op,
                c10::toString(whole.scalar_type()), c10::toString(chunk.scalar_type()));
  DLSCALE_CHECK(whole.numel() == ranks * chunk.numel(),
                "{}: the whole tensor has {} elements, not {} ranks x {} of a chunk", op,
                whole.numel(), ranks, chunk.numel());
}

bool is_own_chunk(const torch::Tensor& whole, const torch::Tensor& chunk, int rank) {
  const auto* base = static_cast<const char*>(whole.data_ptr());
  const int64_t bytes = chunk.numel() * static_cast<int64_t>(chunk.element_size());
  return chunk.data_ptr() == base + rank * bytes;
}

torch::Tensor Communicator::allgather(const torch::Tensor& input) {
  std::vector<int64_t> shape{size()};
  for (int64_t d : input.sizes()) shape.push_back(d);
  torch::Tensor out = torch::empty(shape, input.options());
  allgather_into(input, out);
  return out;
}

void check_tag(uint32_t tag, const char* op) {
  DLSCALE_CHECK(tag < (1u << 24), "{}: tag {} is too large; allowed: < 2^24", op, tag);
}

SplitPlan Communicator::plan_split(int color, int key) {
  const torch::Tensor mine = torch::tensor({static_cast<int64_t>(color), static_cast<int64_t>(key)},
                                           torch::kInt64).to(device());
  const torch::Tensor all = allgather(mine).cpu();
  auto a = all.accessor<int64_t, 2>();
  SplitPlan plan;
  plan.split_index = splits_++;
  plan.color = color;
  if (color < 0) return plan;
  std::vector<std::pair<int64_t, int>> members;  // (key, rank) of my colour
  for (int r = 0; r < size(); ++r) {
    if (a[r][0] == color) members.emplace_back(a[r][1], r);
  }
  std::sort(members.begin(), members.end());
  plan.group_size = static_cast<int>(members.size());
  for (int i = 0; i < plan.group_size; ++i) {
    if (members[static_cast<size_t>(i)].second == rank()) plan.group_rank = i;
  }
  DLSCALE_ASSERT(plan.group_rank >= 0);
  return plan;
}

}  // namespace dlscale::comm
