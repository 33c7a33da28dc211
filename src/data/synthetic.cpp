#include "data/synthetic.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>

#include "core/error.h"
#include "compute/torch_compat.h"
#include "data/sampler.h"

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

  // Private generators: the data does not depend on (or disturb) the global
  // RNG that initializes the model. The class patterns come from the seed;
  // each sample from (seed, its global index), so a rank makes only its own
  // slice and N workers together still see exactly one worker's batches.
  at::Generator pattern_gen = at::detail::createCPUGenerator(o.seed);
  const auto f32 = torch::TensorOptions().dtype(torch::kFloat32);
  const int64_t side = std::min(kPatternSide, o.image_size);
  const torch::Tensor patterns =
      torch::randn({o.num_classes, o.channels, side, side}, pattern_gen, f32);

  for (int64_t i = 0; i < o.pool_batches; ++i) {
    std::vector<int64_t> label_values;
    std::vector<torch::Tensor> noises;
    for (int64_t j = 0; j < local_batch_; ++j) {
      const auto index = static_cast<uint64_t>(i * o.global_batch + o.rank * local_batch_ + j);
      const uint64_t sample_seed = mix_seed(o.seed, index);
      label_values.push_back(static_cast<int64_t>(sample_seed % static_cast<uint64_t>(o.num_classes)));
      at::Generator gen = at::detail::createCPUGenerator(sample_seed);
      noises.push_back(torch::randn({o.channels, o.image_size, o.image_size}, gen, f32));
    }
    const torch::Tensor labels = torch::tensor(label_values, torch::kInt64);
    torch::Tensor signal = patterns.index_select(0, labels);
    if (side != o.image_size) {
      signal = torch::upsample_nearest2d(signal, {o.image_size, o.image_size});
    }
    const torch::Tensor inputs = torch::stack(noises) + o.signal * signal;
    pool_.push_back({compat::with_memory_format(inputs.contiguous().to(o.device), o.channels_last),
                     labels.to(o.device)});
  }
}

Batch SyntheticData::batch(int64_t step) {
  return pool_[static_cast<size_t>(step) % pool_.size()];
}

}  // namespace dlscale::data
