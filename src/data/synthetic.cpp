#include "data/synthetic.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>

#include "core/error.h"
#include "core/torch_compat.h"

namespace dlscale::data {

namespace {
constexpr int64_t kPatternSide = 8;  // class patterns are 8×8, upsampled
}

SyntheticData::SyntheticData(const SyntheticOptions& o) {
  DLSCALE_CHECK(o.global_batch >= 1, "batch must be >= 1 (got {})", o.global_batch);
  DLSCALE_CHECK(o.world_size >= 1 && o.rank >= 0 && o.rank < o.world_size,
                "rank {} is outside world size {}", o.rank, o.world_size);
  DLSCALE_CHECK(o.global_batch % o.world_size == 0,
                "global batch {} is not divisible by {} workers", o.global_batch, o.world_size);
  DLSCALE_CHECK(o.pool_batches >= 1, "synthetic pool must hold >= 1 batch (got {})",
                o.pool_batches);
  local_batch_ = o.global_batch / o.world_size;

  // A private generator: the data does not depend on (or disturb) the global
  // RNG that initializes the model.
  at::Generator gen = at::detail::createCPUGenerator(o.seed);
  const auto f32 = torch::TensorOptions().dtype(torch::kFloat32);
  const int64_t side = std::min(kPatternSide, o.image_size);
  const torch::Tensor patterns =
      torch::randn({o.num_classes, o.channels, side, side}, gen, f32);

  for (int64_t i = 0; i < o.pool_batches; ++i) {
    const torch::Tensor labels = torch::randint(o.num_classes, {o.global_batch}, gen,
                                                torch::TensorOptions().dtype(torch::kInt64));
    torch::Tensor signal = patterns.index_select(0, labels);
    if (side != o.image_size) {
      signal = torch::upsample_nearest2d(signal, {o.image_size, o.image_size});
    }
    const torch::Tensor noise =
        torch::randn({o.global_batch, o.channels, o.image_size, o.image_size}, gen, f32);
    const torch::Tensor inputs = noise + o.signal * signal;
    const int64_t begin = o.rank * local_batch_;
    pool_.push_back({compat::with_memory_format(
                         inputs.narrow(0, begin, local_batch_).contiguous().to(o.device),
                         o.channels_last),
                     labels.narrow(0, begin, local_batch_).contiguous().to(o.device)});
  }
}

Batch SyntheticData::batch(int64_t step) {
  return pool_[static_cast<size_t>(step) % pool_.size()];
}

}  // namespace dlscale::data
