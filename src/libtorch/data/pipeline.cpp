#include "libtorch/data/pipeline.h"

#include <atomic>

#include "core/clock.h"
#include "core/error.h"
#include "core/work_pool.h"

namespace dlscale::data {

namespace {

std::unique_ptr<BatchSampler> make_sampler(const Dataset& d, const PipelineOptions& o) {
  if (o.evaluation) {
    return std::make_unique<EvalSlice>(d.info().size, o.global_batch / o.world_size, o.rank,
                                       o.world_size);
  }
  if (o.streaming) {
    StreamingOptions s;
    s.shard_starts = d.info().shard_starts;
    s.dataset_size = d.info().size;
    s.local_batch = o.global_batch / o.world_size;
    s.rank = o.rank;
    s.smallest_samples = o.smallest_part_samples;
    s.smallest_rank = o.smallest_part;
    s.shuffle_buffer = o.shuffle_buffer;
    s.seed = o.seed;
    return std::make_unique<StreamingSampler>(s);
  }
  SamplerOptions s;
  s.dataset_size = d.info().size;
  s.global_batch = o.global_batch;
  s.seed = o.seed;
  s.shuffle = o.shuffle;
  return std::make_unique<GlobalSlice>(s, o.rank, o.world_size);
}

constexpr int kMaxReplacements = 64;  // consecutive corrupt samples --skip-corrupt tolerates

}  // namespace

Pipeline::Pipeline(std::shared_ptr<const Dataset> dataset, const PipelineOptions& o)
    : dataset_(std::move(dataset)), options_(o) {
  DLSCALE_ASSERT(dataset_ != nullptr);
  DLSCALE_CHECK(o.world_size >= 1 && o.global_batch % o.world_size == 0,
                "global batch {} is not divisible by {} workers", o.global_batch, o.world_size);
  sampler_ = make_sampler(*dataset_, o);
  DLSCALE_CHECK(o.threads >= 1, "--data-threads must be >= 1 (got {})", o.threads);
  DLSCALE_CHECK(o.prefetch >= 0, "--prefetch must be >= 0 (got {})", o.prefetch);
  local_batch_ = o.global_batch / o.world_size;
  pool_ = std::make_unique<WorkPool>(o.threads);
  if (o.prefetch > 0) producer_ = std::thread([this] { produce(); });
}

Pipeline::~Pipeline() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (producer_.joinable()) producer_.join();
}

std::string Pipeline::name() const {
  return fmt::format("{}:{}", dataset_->info().format, dataset_->info().location);
}

PipelineStats Pipeline::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  PipelineStats s = stats_;
  s.reduced_decodes = reduced_decodes_;
  s.region_decodes = region_decodes_;
  return s;
}

std::shared_ptr<const Image> Pipeline::load(int64_t index, uint64_t seed, Placement& placement) {
  placement = {};  // as decoded
  if (options_.reduced_decode && !options_.cache) {
    bool reduced = false, region = false;
    DecodedPart part = dataset_->image_part(index, [&](int64_t h, int64_t w) {
      const DecodeRequest r = decode_request(h, w, options_.transform, seed, /*region=*/true);
      reduced = r.denominator > 1;
      region = r.width > 0 && (r.width < static_cast<double>(w) || r.height < static_cast<double>(h));
      return r;
    });
    if (reduced) ++reduced_decodes_;
    if (region) ++region_decodes_;
    placement = part.placement;
    return std::make_shared<const Image>(std::move(part.image));
  }
  if (options_.cache) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = cache_.find(index);
    if (it != cache_.end()) {
      ++stats_.cache_hits;
      return it->second;
    }
  }
  auto image = std::make_shared<const Image>(dataset_->image(index));
  if (options_.cache) {
    const auto bytes = static_cast<int64_t>(image->pixels.size());
    std::lock_guard<std::mutex> lock(mutex_);
    if (options_.cache_bytes > 0 && stats_.cache_bytes + bytes > options_.cache_bytes) {
      ++stats_.cache_full;
    } else if (cache_.emplace(index, image).second) {
      stats_.cache_bytes += bytes;
    }
  }
  return image;
}

Batch Pipeline::build(int64_t step) {
  const double start = now_seconds();
  const TransformOptions& t = options_.transform;
  const std::vector<int64_t> indices = sampler_->rank_indices(step);
  const uint64_t epoch_seed =
      mix_seed(options_.seed, static_cast<uint64_t>(sampler_->epoch_of(step)));
  const int64_t n = dataset_->info().size;
  const auto memory_format =
      options_.channels_last ? torch::MemoryFormat::ChannelsLast : torch::MemoryFormat::Contiguous;
  const auto count = static_cast<int64_t>(indices.size());
  torch::Tensor inputs = torch::empty({count, t.channels, t.size, t.size},
                                      torch::TensorOptions().dtype(torch::kFloat32)
                                          .memory_format(memory_format)
                                          .pinned_memory(options_.device.is_cuda()));
  std::vector<int64_t> labels(indices.size());
  const OutputLayout layout = options_.channels_last ? OutputLayout::hwc(t.channels, t.size)
                                                     : OutputLayout::chw(t.channels, t.size);
  float* base = inputs.data_ptr<float>();
  std::atomic<int64_t> skipped{0};
  pool_->run(count, [&](int64_t j) {
    int64_t index = indices[static_cast<size_t>(j)];
    for (int attempt = 0;; ++attempt) {
      try {
        const uint64_t seed = mix_seed(epoch_seed, static_cast<uint64_t>(index));
        Placement placement;
        const std::shared_ptr<const Image> image = load(index, seed, placement);
        transform_image(*image, t, seed, base + j * t.channels * t.size * t.size, layout, placement);
        labels[static_cast<size_t>(j)] = dataset_->label(index);
        return;
      } catch (const StaleIndex&) {
        throw;  // not one bad sample: the index no longer describes the shard
      } catch (const Error&) {
        // The replacement is the next index, so every rank and worker count
        // substitutes the same sample and runs stay comparable.
        if (!options_.skip_corrupt || attempt + 1 >= kMaxReplacements) throw;
        ++skipped;
        index = (index + 1) % n;
      }
    }
  });
  Batch batch{{{kImage, inputs}}, {{kLabel, torch::tensor(labels, torch::kInt64)}}};
  if (options_.device.is_cuda()) {
    // From pinned memory without blocking this thread: the copy is queued on
    // the compute stream ahead of the step that uses it.
    for (auto& [unused, x] : batch.inputs) x = x.to(options_.device, /*non_blocking=*/true);
    for (auto& [unused, x] : batch.targets) x = x.pin_memory().to(options_.device, /*non_blocking=*/true);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.busy_seconds += now_seconds() - start;
  stats_.batches += 1;
  stats_.samples += count;
  stats_.skipped += skipped.load();
  return batch;
}

void Pipeline::produce() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return stopping_ || next_ < wanted_ + options_.prefetch; });
    if (stopping_) return;
    const int64_t step = next_++;
    lock.unlock();
    Ready ready;
    try {
      ready.batch = build(step);
    } catch (...) {
      ready.error = std::current_exception();
    }
    lock.lock();
    if (step >= wanted_) ready_[step] = std::move(ready);  // else a jump made it stale
    changed_.notify_all();
  }
}

Batch Pipeline::batch(int64_t step) {
  if (options_.prefetch == 0) return build(step);
  std::unique_lock<std::mutex> lock(mutex_);
  if (step != wanted_) {  // a jump: restart the prefetch from here
    ready_.clear();
    next_ = step;
  }
  wanted_ = step;
  changed_.notify_all();
  changed_.wait(lock, [&] { return ready_.count(step) != 0; });
  Ready ready = std::move(ready_.at(step));
  ready_.erase(step);
  wanted_ = step + 1;
  changed_.notify_all();
  if (ready.error) std::rethrow_exception(ready.error);
  return ready.batch;
}

}  // namespace dlscale::data
