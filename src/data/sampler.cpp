#include "data/sampler.h"

#include <algorithm>
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

/// A value in [0, bound) from 64 random bits: multiply-shift, without modulo
/// bias worth speaking of at dataset sizes (< 2^40).
uint64_t below(uint64_t random, uint64_t bound) {
  __extension__ typedef unsigned __int128 wide;
  return static_cast<uint64_t>((static_cast<wide>(random) * bound) >> 64);
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
      const auto j = static_cast<size_t>(below(splitmix64(state), i + 1));
      std::swap(order_[i], order_[j]);
    }
    cached_epoch_ = epoch;
  }
  for (int64_t k = 0; k < count; ++k) out[static_cast<size_t>(k)] = order_[static_cast<size_t>(first + k)];
  return out;
}

}  // namespace dlscale::data

namespace dlscale::data {

GlobalSlice::GlobalSlice(const SamplerOptions& options, int64_t rank, int64_t world_size)
    : sampler_(options), rank_(rank), local_batch_(options.global_batch / world_size) {
  DLSCALE_ASSERT(world_size >= 1 && rank >= 0 && rank < world_size);
}

EvalSlice::EvalSlice(int64_t dataset_size, int64_t local_batch, int64_t rank, int64_t world_size)
    : begin_(rank * dataset_size / world_size),
      end_((rank + 1) * dataset_size / world_size),
      local_batch_(local_batch),
      batches_((end_ - begin_ + local_batch - 1) / local_batch) {
  DLSCALE_ASSERT(world_size >= 1 && rank >= 0 && rank < world_size && local_batch >= 1);
}

std::vector<int64_t> EvalSlice::rank_indices(int64_t step) {
  if (batches_ == 0) return {};
  const int64_t first = begin_ + (step % batches_) * local_batch_;
  std::vector<int64_t> indices;
  for (int64_t i = first; i < std::min(end_, first + local_batch_); ++i) indices.push_back(i);
  return indices;
}

namespace {

/// Samples of shard k: [starts[k], starts[k + 1]) with the dataset's end last.
int64_t shard_end(const StreamingOptions& o, size_t k) {
  return k + 1 < o.shard_starts.size() ? o.shard_starts[k + 1] : o.dataset_size;
}

}  // namespace

StreamingSampler::StreamingSampler(StreamingOptions o) : options_(std::move(o)) {
  DLSCALE_CHECK(options_.shuffle_buffer >= 1, "--shuffle-buffer must be >= 1 (got {})",
                options_.shuffle_buffer);
  DLSCALE_ASSERT(!options_.shard_starts.empty() && options_.shard_starts.front() == 0);
  if (options_.smallest_samples == 0) {
    options_.smallest_samples = options_.dataset_size;
    options_.smallest_rank = options_.rank;
  }
  steps_per_epoch_ = options_.smallest_samples / options_.local_batch;
  DLSCALE_CHECK(steps_per_epoch_ >= 1,
                "--data-order streaming: worker {}'s shards hold {} samples, fewer than one batch of {}",
                options_.smallest_rank, options_.smallest_samples, options_.local_batch);
}

std::vector<int64_t> StreamingSampler::epoch_order(int64_t epoch) const {
  const StreamingOptions& o = options_;
  std::vector<size_t> mine(o.shard_starts.size());
  for (size_t k = 0; k < mine.size(); ++k) mine[k] = k;
  uint64_t state = mix_seed(mix_seed(o.seed, static_cast<uint64_t>(epoch)), static_cast<uint64_t>(o.rank));
  auto next = [&state](uint64_t bound) {
    state = mix_seed(state, 0x2545f491u);
    return static_cast<size_t>(below(state, bound));
  };
  for (size_t i = mine.size(); i > 1; --i) std::swap(mine[i - 1], mine[next(i)]);
  std::vector<int64_t> buffer, out;
  const auto capacity = static_cast<size_t>(o.shuffle_buffer);
  for (size_t k : mine) {
    for (int64_t index = o.shard_starts[k]; index < shard_end(o, k); ++index) {
      if (buffer.size() < capacity) {
        buffer.push_back(index);
        continue;
      }
      const size_t j = next(buffer.size());
      out.push_back(buffer[j]);
      buffer[j] = index;
    }
  }
  while (!buffer.empty()) {  // drain in random order
    const size_t j = next(buffer.size());
    out.push_back(buffer[j]);
    buffer[j] = buffer.back();
    buffer.pop_back();
  }
  return out;
}

std::vector<int64_t> StreamingSampler::rank_indices(int64_t step) {
  const int64_t epoch = epoch_of(step);
  std::lock_guard<std::mutex> lock(mutex_);
  if (epoch != cached_epoch_) {
    order_ = epoch_order(epoch);
    cached_epoch_ = epoch;
  }
  const auto first = order_.begin() + (step % steps_per_epoch_) * options_.local_batch;
  return {first, first + options_.local_batch};
}

}  // namespace dlscale::data
