#include "libtorch/dp/independent_sync.h"

namespace dlscale::dp {
namespace {

class IndependentSync : public GradientSync {
 public:
  IndependentSync() {
    info_.strategy = "independent";
    info_.layout = "none";
    info_.exchange = "none";
    info_.formula = "0";
    info_.keeps_replicas_identical = false;
  }
  const SyncInfo& info() const override { return info_; }
  void begin_backward() override {}
  SyncStepStats end_backward() override { return {}; }

 private:
  SyncInfo info_;
};

}  // namespace

std::unique_ptr<GradientSync> make_independent_sync() {
  return std::make_unique<IndependentSync>();
}

}  // namespace dlscale::dp
