#include "libtorch/comm/agreement.h"

#include <cstring>

#include "core/text.h"
#include "core/error.h"

namespace dlscale::comm {

std::vector<std::string> allgather_strings(Communicator& comm, const std::string& mine) {
  torch::Tensor len = torch::tensor({static_cast<int64_t>(mine.size())}, torch::kInt64);
  const torch::Tensor lens = comm.allgather(len);
  const int64_t max_len = lens.max().item<int64_t>();
  torch::Tensor padded = torch::zeros({std::max<int64_t>(max_len, 1)}, torch::kUInt8);
  std::memcpy(padded.data_ptr(), mine.data(), mine.size());
  const torch::Tensor all = comm.allgather(padded);
  std::vector<std::string> out;
  for (int r = 0; r < comm.size(); ++r) {
    const auto* p = static_cast<const char*>(all[r].data_ptr());
    out.emplace_back(p, static_cast<size_t>(lens[r][0].item<int64_t>()));
  }
  return out;
}

void check_same_config(Communicator& comm, const nlohmann::json& fields) {
  const std::vector<std::string> all = allgather_strings(comm, dump_json(fields));
  const nlohmann::json reference = nlohmann::json::parse(all[0]);
  for (int r = 1; r < comm.size(); ++r) {
    const nlohmann::json other = nlohmann::json::parse(all[r]);
    for (auto it = reference.begin(); it != reference.end(); ++it) {
      const nlohmann::json theirs = other.contains(it.key()) ? other[it.key()] : nlohmann::json();
      DLSCALE_CHECK(theirs == it.value(),
                    "workers disagree on the run config: rank {} has {}={}, rank 0 has {}={}", r,
                    it.key(), dump_json(theirs), it.key(), dump_json(it.value()));
    }
  }
}

}  // namespace dlscale::comm
