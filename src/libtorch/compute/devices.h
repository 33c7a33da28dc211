#pragma once
// Which device a worker computes on (docs/gpu.md, "One GPU per rank").
#include <string>

#include <torch/torch.h>

namespace dlscale {

/// The device of the worker with `local_rank` of `local_world` workers on its
/// node, for --device `requested`: "cpu"; "cuda" gives local rank r the GPU
/// r mod (visible GPUs); "cuda:N" is GPU N for every worker. Throws
/// dlscale::Error when no GPU is visible, N is out of range, or workers would
/// share a GPU and `share_gpus` is false.
torch::Device worker_device(const std::string& requested, int local_rank, int local_world,
                            bool share_gpus);

/// How the worker's kernels are chosen. By default cuDNN times each
/// convolution's algorithms on its first call and keeps the fastest (as
/// torch.backends.cudnn.benchmark and tf_cnn_benchmarks' autotuning do), so
/// two runs may compute with different algorithms. `deterministic` (the
/// --deterministic flag) asks for deterministic algorithms instead: cuDNN's
/// deterministic ones without autotuning, cuBLAS's reproducible workspace
/// (CUBLAS_WORKSPACE_CONFIG, unless set), and LibTorch's deterministic
/// kernels where it has them (a warning names an op that has none).
void choose_algorithms(const torch::Device& device, bool deterministic);

}  // namespace dlscale
