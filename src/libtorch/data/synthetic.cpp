#include "libtorch/data/synthetic.h"

#include "core/error.h"
#include "libtorch/compute/torch_compat.h"

namespace dlscale::data {

namespace {

/// The samples' tensors named `name`, stacked into a batch on `device`.
torch::Tensor stack_named(const std::vector<TensorMap>& samples, const std::string& name,
                          const SyntheticOptions& o) {
  std::vector<torch::Tensor> parts;
  parts.reserve(samples.size());
  for (const TensorMap& s : samples) {
    const auto it = s.find(name);
    DLSCALE_CHECK(it != s.end(), "synthetic sample lacks tensor '{}'", name);
    parts.push_back(it->second);
  }
  torch::Tensor batch = torch::stack(parts).contiguous().to(o.device);
  if (batch.dim() == 4 && batch.is_floating_point()) {
    batch = compat::with_memory_format(batch, o.channels_last);
  }
  return batch;
}

std::vector<std::string> names_of(const TensorMap& m) {
  std::vector<std::string> names;
  for (const auto& [name, unused] : m) names.push_back(name);
  return names;
}

/// The samples `indices` of `sample`, stacked into a batch.
Batch make_batch(const std::vector<uint64_t>& indices, const SampleFn& sample, const SyntheticOptions& o,
                 Provides& provides) {
  std::vector<TensorMap> inputs, targets;
  for (const uint64_t index : indices) {
    Sample s = sample(index);
    inputs.push_back(std::move(s.inputs));
    targets.push_back(std::move(s.targets));
  }
  if (provides.inputs.empty()) provides = {names_of(inputs.front()), names_of(targets.front())};
  Batch b;
  for (const std::string& name : provides.inputs) b.inputs[name] = stack_named(inputs, name, o);
  for (const std::string& name : provides.targets) b.targets[name] = stack_named(targets, name, o);
  return b;
}

/// This rank's samples per batch; throws dlscale::Error when the options
/// cannot split a global batch over the workers.
int64_t local_batch_of(const SyntheticOptions& o) {
  DLSCALE_CHECK(o.global_batch >= 1, "batch must be >= 1 (got {})", o.global_batch);
  DLSCALE_CHECK(o.world_size >= 1 && o.rank >= 0 && o.rank < o.world_size,
                "rank {} is outside world size {}", o.rank, o.world_size);
  DLSCALE_CHECK(o.global_batch % o.world_size == 0,
                "global batch {} is not divisible by {} workers", o.global_batch, o.world_size);
  return o.global_batch / o.world_size;
}

}  // namespace

SyntheticData::SyntheticData(const SyntheticOptions& o, const SampleFn& sample) {
  local_batch_ = local_batch_of(o);
  DLSCALE_CHECK(o.pool_batches >= 1, "synthetic pool must hold >= 1 batch (got {})",
                o.pool_batches);
  DLSCALE_ASSERT(sample != nullptr);
  for (int64_t i = 0; i < o.pool_batches; ++i) {
    std::vector<uint64_t> indices;
    for (int64_t j = 0; j < local_batch_; ++j) {
      indices.push_back(static_cast<uint64_t>(i * o.global_batch + o.rank * local_batch_ + j));
    }
    pool_.push_back(make_batch(indices, sample, o, provides_));
  }
}

Batch SyntheticData::batch(int64_t step) {
  return pool_[static_cast<size_t>(step) % pool_.size()];
}

SyntheticTestData::SyntheticTestData(int64_t test_samples, const SyntheticOptions& o, const SampleFn& sample)
    : options_(o),
      sample_(sample),
      local_batch_(local_batch_of(o)),
      slice_(test_samples, local_batch_, o.rank, o.world_size) {
  DLSCALE_ASSERT(sample_ != nullptr && test_samples >= 1);
  make_batch({0}, sample_, options_, provides_);  // what its batches hold
}

Batch SyntheticTestData::batch(int64_t step) {
  std::vector<uint64_t> indices;
  for (const int64_t i : slice_.rank_indices(step)) indices.push_back(static_cast<uint64_t>(i));
  return make_batch(indices, sample_, options_, provides_);
}

}  // namespace dlscale::data
