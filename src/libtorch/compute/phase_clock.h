#pragma once
// Timestamps of the boundaries between a step's phases. On CPU they are host
// clock readings. On a GPU, reading the host clock at each boundary would
// first have to wait for the device (serialising the step), so the CUDA clock
// records an event on the compute stream instead and reads the events once,
// after the step (docs/gpu.md, "Phase timing").
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dlscale {

class PhaseClock {
 public:
  virtual ~PhaseClock() = default;
  /// Marks boundary `i` (0 .. marks-1, in order) on the host or the stream.
  virtual void mark(size_t i) = 0;
  /// Seconds of each mark after mark 0, waiting for the device if needed;
  /// valid once every mark of the step was made.
  virtual std::vector<double> offsets() = 0;
  /// "host-clock" or "cuda-events" (recorded with the run).
  virtual std::string method() const = 0;
};

/// Reads the host's steady clock at each mark.
std::unique_ptr<PhaseClock> make_host_phase_clock(size_t marks);

/// CUDA events on the legacy default stream of GPU `device` (what LibTorch
/// computes on); null in a build without CUDA.
std::unique_ptr<PhaseClock> make_cuda_phase_clock(int device, size_t marks);

/// The GPU's name ("NVIDIA H100 80GB HBM3"); "" without CUDA.
std::string cuda_device_name(int device);

/// The most bytes LibTorch's CUDA caching allocator has held in tensors on
/// GPU `device` so far in this process (PyTorch's
/// torch.cuda.max_memory_allocated); -1 in a build without CUDA.
int64_t cuda_peak_allocated_bytes(int device);

}  // namespace dlscale
