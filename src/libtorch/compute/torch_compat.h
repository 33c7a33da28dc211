#pragma once
// The one place where differences between LibTorch versions live: Debian's
// 1.13 (CPU) and the 2.x shipped inside a CUDA PyTorch install. Everything
// else in dlscale calls these helpers instead of version-specific APIs.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/autocast_mode.h>
#include <torch/torch.h>

#include <mutex>
#include <torch/version.h>

#include <string>

namespace dlscale::compat {

inline constexpr int kTorchMajor = TORCH_VERSION_MAJOR;
inline constexpr int kTorchMinor = TORCH_VERSION_MINOR;

/// "major.minor.patch" of the LibTorch we were compiled against.
inline std::string torch_version() {
  return std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." +
         std::to_string(TORCH_VERSION_PATCH);
}

/// Drops gradients (grad = undefined) instead of zero-filling them. 1.13's C++
/// Optimizer::zero_grad() takes no argument and zero-fills; 2.x's defaults to
/// set_to_none. Doing it ourselves behaves the same on both and saves a memset.
inline void zero_grad_to_none(torch::optim::Optimizer& optimizer) {
  for (auto& group : optimizer.param_groups()) {
    for (auto& p : group.params()) {
      if (p.grad().defined()) p.mutable_grad().reset();
    }
  }
}

/// `t` in channels-last (NHWC) memory order when `channels_last`, else NCHW.
/// Uses to(memory_format), which restrides even when the layout is ambiguous
/// (one channel, or 1×1 maps); contiguous(ChannelsLast) would leave such a
/// tensor NCHW-strided and make oneDNN mix layouts (lenet's first conv).
inline torch::Tensor with_memory_format(const torch::Tensor& t, bool channels_last) {
  if (t.dim() != 4) return t;
  const auto format = channels_last ? torch::MemoryFormat::ChannelsLast : torch::MemoryFormat::Contiguous;
  return t.to(t.options(), /*non_blocking=*/false, /*copy=*/false, format);
}

/// True when LibTorch was built with CUDA and a device is visible.
inline bool cuda_available() { return torch::cuda::is_available(); }

/// GPUs visible to this process (0 with a CPU LibTorch).
inline int cuda_device_count() { return static_cast<int>(torch::cuda::device_count()); }

/// Mixed precision for the forward pass on `device`'s type while alive
/// (autocast to `dtype`: bfloat16 or float16). 1.13 names the CUDA switch
/// set_enabled/set_autocast_gpu_dtype and the CPU one set_cpu_enabled; 2.4+
/// takes the device type. Leaving the scope clears autocast's weight cache,
/// as torch.autocast's __exit__ does.
class AutocastScope {
 public:
  AutocastScope(const torch::Device& device, torch::ScalarType dtype) : type_(device.type()) {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
    was_enabled_ = at::autocast::is_autocast_enabled(type_);
    was_dtype_ = at::autocast::get_autocast_dtype(type_);
    at::autocast::set_autocast_dtype(type_, dtype);
    at::autocast::set_autocast_enabled(type_, true);
#else
    if (type_ == torch::kCUDA) {
      was_enabled_ = at::autocast::is_enabled();
      was_dtype_ = at::autocast::get_autocast_gpu_dtype();
      at::autocast::set_autocast_gpu_dtype(dtype);
      at::autocast::set_enabled(true);
    } else {
      was_enabled_ = at::autocast::is_cpu_enabled();
      was_dtype_ = at::autocast::get_autocast_cpu_dtype();
      at::autocast::set_autocast_cpu_dtype(dtype);
      at::autocast::set_cpu_enabled(true);
    }
#endif
    at::autocast::increment_nesting();
  }
  ~AutocastScope() {
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
    at::autocast::set_autocast_enabled(type_, was_enabled_);
    at::autocast::set_autocast_dtype(type_, was_dtype_);
#else
    if (type_ == torch::kCUDA) {
      at::autocast::set_enabled(was_enabled_);
      at::autocast::set_autocast_gpu_dtype(was_dtype_);
    } else {
      at::autocast::set_cpu_enabled(was_enabled_);
      at::autocast::set_autocast_cpu_dtype(was_dtype_);
    }
#endif
  }
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  torch::DeviceType type_;
  bool was_enabled_ = false;
  torch::ScalarType was_dtype_ = torch::kFloat32;
};

/// The default CPU generator's state (dropout masks, random init) and back:
/// what a checkpoint keeps so a resumed run draws the same numbers.
inline torch::Tensor cpu_rng_state() {
  at::Generator gen = at::detail::getDefaultCPUGenerator();  // a handle: shares the generator
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}
inline void set_cpu_rng_state(const torch::Tensor& state) {
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

}  // namespace dlscale::compat
