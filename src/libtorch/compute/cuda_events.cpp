// The CUDA side of libtorch/compute/phase_clock.h (compiled only in CUDA builds; the CPU
// build's stand-ins live in libtorch/compute/phase_clock.cpp). LibTorch's own event
// wrapper records on LibTorch's current stream of the device, so the events
// see exactly the work the trainer queued.
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>

#include <vector>

#include "core/error.h"
#include "libtorch/compute/phase_clock.h"

namespace dlscale {
namespace {

class CudaPhaseClock : public PhaseClock {
 public:
  CudaPhaseClock(int device, size_t marks) : device_(static_cast<c10::DeviceIndex>(device)) {
    for (size_t i = 0; i < marks; ++i) events_.emplace_back(cudaEventDefault);  // timing on
  }
  void mark(size_t i) override {
    DLSCALE_ASSERT(i < events_.size());
    const c10::cuda::CUDAGuard guard(device_);
    events_[i].record(at::cuda::getCurrentCUDAStream(device_));
  }
  std::vector<double> offsets() override {
    const c10::cuda::CUDAGuard guard(device_);
    events_.back().synchronize();
    std::vector<double> out(events_.size(), 0.0);
    for (size_t i = 1; i < events_.size(); ++i) out[i] = events_[0].elapsed_time(events_[i]) / 1000.0;
    return out;
  }
  std::string method() const override { return "cuda-events"; }

 private:
  c10::DeviceIndex device_;
  std::vector<at::cuda::CUDAEvent> events_;
};

}  // namespace

std::unique_ptr<PhaseClock> make_cuda_phase_clock(int device, size_t marks) {
  return std::make_unique<CudaPhaseClock>(device, marks);
}

std::string cuda_device_name(int device) {
  return at::cuda::getDeviceProperties(static_cast<c10::DeviceIndex>(device))->name;
}

int64_t cuda_peak_allocated_bytes(int device) {
  // allocated_bytes is indexed by the allocator's StatType; 0 is AGGREGATE
  // (both pools), what torch.cuda.max_memory_allocated reads.
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(device));
  return stats.allocated_bytes[0].peak;
}

}  // namespace dlscale
