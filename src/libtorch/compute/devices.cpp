#include "libtorch/compute/devices.h"

#include <cstdlib>

#include "core/error.h"
#include "libtorch/compute/torch_compat.h"

namespace dlscale {

torch::Device worker_device(const std::string& requested, int local_rank, int local_world,
                            bool share_gpus) {
  torch::Device device = torch::kCPU;
  try {
    device = torch::Device(requested);
  } catch (const std::exception&) {
    throw Error(fmt::format("unknown device '{}'; allowed: cpu, cuda, cuda:N", requested));
  }
  if (device.is_cpu()) return device;
  DLSCALE_CHECK(device.is_cuda(), "unsupported device '{}'; allowed: cpu, cuda, cuda:N", requested);
  const int gpus = compat::cuda_device_count();
  DLSCALE_CHECK(gpus > 0,
                "--device {}: no GPU is visible (or this dlscale was built against a LibTorch "
                "without CUDA; see docs/gpu.md)",
                requested);
  if (device.has_index()) {
    DLSCALE_CHECK(device.index() < gpus, "--device {}: only {} GPU(s) visible (cuda:0..cuda:{})",
                  requested, gpus, gpus - 1);
    DLSCALE_CHECK(local_world == 1 || share_gpus,
                  "--device {} puts all {} workers of this node on one GPU: add --share-gpus "
                  "(Gloo only), or give --device cuda for one GPU per worker",
                  requested, local_world);
    return device;
  }
  DLSCALE_CHECK(local_world <= gpus || share_gpus,
                "--device cuda: {} workers on this node but {} GPU(s) visible; add --share-gpus "
                "to let workers share GPUs (Gloo only: NCCL needs a GPU per rank), or use "
                "--workers {}",
                local_world, gpus, gpus);
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(local_rank % gpus));
}

void choose_algorithms(const torch::Device& device, bool deterministic) {
  at::Context& context = at::globalContext();
  // Read by cuBLAS when its first handle is made (after this).
  if (deterministic) setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0);
  // Process-wide: set both ways, so a second trainer in one process (tests)
  // does not inherit the first one's choice.
  context.setDeterministicAlgorithms(deterministic, /*warn_only=*/true);
  if (!device.is_cuda()) return;
  context.setBenchmarkCuDNN(!deterministic);
  context.setDeterministicCuDNN(deterministic);
}

}  // namespace dlscale
