#pragma once
// ResNet pieces other models build on (ssd300's backbone).
#include <torch/torch.h>

#include <cstdint>

namespace dlscale::models {

/// A stage of `blocks` torchvision basic residual blocks (ResNet-18/34) from
/// `in` to `planes` channels, the first at `stride`; each block is one
/// element of the Sequential.
torch::nn::Sequential resnet_basic_stage(int64_t in, int64_t planes, int64_t blocks,
                                         int64_t stride);

}  // namespace dlscale::models
