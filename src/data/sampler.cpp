#include "data/sampler.h"

#include <numeric>

#include "core/error.h"

namespace dlscale::data {

namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

uint64_t mix_seed(uint64_t seed, uint64_t value) {
  uint64_t state = seed;
  const uint64_t a = splitmix64(state);
  state = a ^ value;
  return splitmix64(state);
}

GlobalSampler::GlobalSampler(const SamplerOptions& o) : options_(o) {
  DLSCALE_CHECK(o.global_batch >= 1, "global batch must be >= 1 (got {})", o.global_batch);
  DLSCALE_CHECK(o.dataset_size >= o.global_batch,
                "the dataset holds {} samples, fewer than one global batch of {}",
                o.dataset_size, o.global_batch);
  steps_per_epoch_ = o.dataset_size / o.global_batch;
}

std::vector<int64_t> GlobalSampler::indices(int64_t step, int64_t begin, int64_t count) {
  DLSCALE_ASSERT(step >= 0 && begin >= 0 && count >= 0 && begin + count <= options_.global_batch);
  const int64_t epoch = epoch_of(step);
  const int64_t first = (step % steps_per_epoch_) * options_.global_batch + begin;
  std::vector<int64_t> out(static_cast<size_t>(count));
  if (!options_.shuffle) {
    std::iota(out.begin(), out.end(), first);
    return out;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (epoch != cached_epoch_) {
    order_.resize(static_cast<size_t>(options_.dataset_size));
    std::iota(order_.begin(), order_.end(), int64_t{0});
    uint64_t state = mix_seed(options_.seed, static_cast<uint64_t>(epoch));
    for (size_t i = order_.size() - 1; i > 0; --i) {
      // Multiply-shift maps 64 random bits to [0, i] without modulo bias
      // worth speaking of at dataset sizes (< 2^40).
      const auto j = static_cast<size_t>(
          (static_cast<unsigned __int128>(splitmix64(state)) * (i + 1)) >> 64);
      std::swap(order_[i], order_[j]);
    }
    cached_epoch_ = epoch;
  }
  for (int64_t k = 0; k < count; ++k) out[static_cast<size_t>(k)] = order_[static_cast<size_t>(first + k)];
  return out;
}

}  // namespace dlscale::data
