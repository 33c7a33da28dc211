#include "libtorch/compute/threads.h"

#include <ATen/Parallel.h>
#include <dlfcn.h>

#include <mutex>

namespace dlscale {
namespace {

template <typename Fn>
Fn find_symbol(const char* name) {
  return reinterpret_cast<Fn>(::dlsym(RTLD_DEFAULT, name));
}

}  // namespace

void set_compute_threads(int threads) {
  // Changing a thread pool while another thread computes in it is unsafe
  // (OpenBLAS): ranks run as threads all ask for the same count, so only the
  // first call may change anything.
  if (at::get_num_threads() == threads && blas_threads() == threads) return;
  // LibTorch allows setting inter-op threads once per process, before use.
  static std::once_flag interop_once;
  std::call_once(interop_once, [] {
    try {
      at::set_num_interop_threads(1);
    } catch (const std::exception&) {
      // The inter-op pool already started in this process; harmless.
    }
  });
  at::set_num_threads(threads);
  if (auto set = find_symbol<void (*)(int)>("openblas_set_num_threads")) set(threads);
}

int compute_threads() { return at::get_num_threads(); }

int blas_threads() {
  if (auto get = find_symbol<int (*)()>("openblas_get_num_threads")) return get();
  return -1;
}

std::string blas_config() {
  std::string config;
  if (auto get = find_symbol<char* (*)()>("openblas_get_config")) {
    if (const char* c = get()) config = c;
  }
  // With DYNAMIC_ARCH the config names the build's base target; the kernel
  // actually chosen for this CPU at load time is the "core".
  if (auto get = find_symbol<char* (*)()>("openblas_get_corename")) {
    if (const char* c = get()) config += std::string(config.empty() ? "" : "; ") + "core " + c;
  }
  return config;
}

}  // namespace dlscale
