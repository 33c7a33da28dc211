#include "libtorch/train/backward_profile.h"

#include "core/clock.h"
#include "core/record_keys.h"
#include "core/stats.h"

namespace dlscale::train {

BackwardProfiler::BackwardProfiler(std::vector<torch::Tensor> params)
    : params_(std::move(params)), current_(params_.size(), -1.0), ready_(params_.size()) {
  for (size_t k = 0; k < params_.size(); ++k) {
    if (!params_[k].requires_grad()) continue;
    hooks_.push_back(params_[k].register_hook([this, k](const torch::Tensor& /*grad*/) {
      current_[k] = now_seconds() - start_;
    }));
  }
}

BackwardProfiler::~BackwardProfiler() {
  size_t h = 0;
  for (auto& p : params_) {
    if (p.requires_grad() && h < hooks_.size()) p.remove_hook(hooks_[h++]);
  }
}

void BackwardProfiler::begin(double now) {
  start_ = now;
  std::fill(current_.begin(), current_.end(), -1.0);
}

void BackwardProfiler::end(double now, bool measured) {
  if (!measured) return;
  const double backward = now - start_;
  backward_.push_back(backward);
  for (size_t k = 0; k < current_.size(); ++k) ready_[k].push_back(current_[k] >= 0 ? current_[k] : backward);
}

nlohmann::json BackwardProfiler::to_json() const {
  if (backward_.empty()) return nullptr;
  nlohmann::json tensors = nlohmann::json::array();
  for (size_t k = 0; k < params_.size(); ++k) {
    tensors.push_back({{"bytes", params_[k].numel() * static_cast<int64_t>(params_[k].element_size())},
                       {"ready_ms", median(ready_[k]) * 1e3}});
  }
  return {{"backward_ms", median(backward_) * 1e3},
          {"steps", backward_.size()},
          {record::kProfileTensors, std::move(tensors)}};
}

}  // namespace dlscale::train
