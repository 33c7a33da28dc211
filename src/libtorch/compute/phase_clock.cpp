#include "libtorch/compute/phase_clock.h"

#include "core/clock.h"
#include "core/error.h"

namespace dlscale {
namespace {

class HostPhaseClock : public PhaseClock {
 public:
  explicit HostPhaseClock(size_t marks) : stamps_(marks, 0.0) {}
  void mark(size_t i) override {
    DLSCALE_ASSERT(i < stamps_.size());
    stamps_[i] = now_seconds();
  }
  std::vector<double> offsets() override {
    std::vector<double> out(stamps_.size(), 0.0);
    for (size_t i = 1; i < stamps_.size(); ++i) out[i] = stamps_[i] - stamps_[0];
    return out;
  }
  std::string method() const override { return "host-clock"; }

 private:
  std::vector<double> stamps_;
};

}  // namespace

std::unique_ptr<PhaseClock> make_host_phase_clock(size_t marks) {
  return std::make_unique<HostPhaseClock>(marks);
}

#if !DLSCALE_WITH_CUDA
std::unique_ptr<PhaseClock> make_cuda_phase_clock(int /*device*/, size_t /*marks*/) { return nullptr; }
std::string cuda_device_name(int /*device*/) { return ""; }
int64_t cuda_peak_allocated_bytes(int /*device*/) { return -1; }
#endif

}  // namespace dlscale
