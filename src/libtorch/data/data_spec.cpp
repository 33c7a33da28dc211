#include "libtorch/data/data_spec.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <sstream>

#include "core/error.h"
#include "data/staging.h"
#include "libtorch/data/pipeline.h"
#include "libtorch/data/synthetic.h"

namespace dlscale::data {

OpenedData open_data(const DataOptions& o, int64_t channels, Split split, ShardPick pick) {
  OpenedData out;
  out.spec = parse_data_spec(o.spec);
  out.pick = pick;
  if (out.spec.kind == "synthetic") return out;
  std::shared_ptr<const Dataset> d = open_dataset(out.spec, split, channels, pick);
  if (!o.stage_dir.empty()) {
    const StageResult staged = stage_files(d->info().files, out.spec.path, o.stage_dir);
    out.stage_seconds = staged.seconds;
    out.staged_bytes = staged.bytes_copied;
    out.spec.path = staged.location;
    d = open_dataset(out.spec, split, channels, pick);
  }
  out.dataset = std::move(d);
  return out;
}

PartsAgreement agree_parts(const std::vector<DatasetInfo>& parts) {
  DLSCALE_ASSERT(!parts.empty());
  PartsAgreement a;
  a.smallest_samples = parts[0].size;
  a.image_size = parts[0].image_size;
  for (size_t p = 0; p < parts.size(); ++p) {
    const DatasetInfo& part = parts[p];
    a.samples += part.size;
    a.bytes += part.bytes;
    a.num_classes = std::max(a.num_classes, part.num_classes);
    if (part.size < a.smallest_samples) {
      a.smallest_samples = part.size;
      a.smallest_part = static_cast<int64_t>(p);
    }
  }
  return a;
}

std::string part_text(const DatasetInfo& part) {
  return fmt::format("{} {} {} {}", part.size, part.bytes, part.num_classes, part.image_size);
}

DatasetInfo from_part_text(const std::string& text, size_t rank) {
  DatasetInfo part;
  std::istringstream in(text);
  in >> part.size >> part.bytes >> part.num_classes >> part.image_size;
  DLSCALE_CHECK(!in.fail(), "worker {} sent a malformed description of its shards: '{}'", rank,
                text);
  return part;
}

DatasetInfo as_whole(DatasetInfo part, const PartsAgreement& parts) {
  part.size = parts.samples;
  part.bytes = parts.bytes;
  part.num_classes = parts.num_classes;
  part.image_size = parts.image_size;
  return part;
}

std::string resolve_augment(const DataOptions& o, const OpenedData& data) {
  if (o.augment != AugmentChoice::kAuto) return enum_names(o.augment).name(o.augment);
  if (!data.dataset) return "none";
  return data.dataset->info().encoded ? "rrc-flip" : "crop-flip";
}

std::unique_ptr<DataSource> make_data_source(const OpenedData& data, const DataOptions& o,
                                             const SourceOptions& s) {
  if (!data.dataset) {
    DLSCALE_CHECK(s.synthetic != nullptr, "synthetic data needs a sample generator (the model's task)");
    SyntheticOptions so;
    so.global_batch = s.global_batch;
    so.rank = s.rank;
    so.world_size = s.world_size;
    so.pool_batches = s.synthetic_batches;
    so.device = s.device;
    so.channels_last = s.channels_last;
    if (!s.train) return std::make_unique<SyntheticTestData>(o.synthetic_test, so, s.synthetic);
    return std::make_unique<SyntheticData>(so, s.synthetic);
  }
  check_labels(*data.dataset, s.num_classes);
  PipelineOptions po;
  po.global_batch = s.global_batch;
  po.rank = s.rank;
  po.world_size = s.world_size;
  po.seed = s.seed;
  po.shuffle = o.shuffle;
  po.streaming = s.train && o.order == DataOrder::kStreaming;
  po.evaluation = !s.train;
  po.shuffle_buffer = o.shuffle_buffer;
  if (data.pick.of > 1) {
    DLSCALE_ASSERT(data.parts.smallest_samples > 0);  // the caller agreed the parts
    po.smallest_part_samples = data.parts.smallest_samples;
    po.smallest_part = data.parts.smallest_part;
  }
  po.threads = o.threads;
  po.prefetch = o.prefetch;
  po.cache = o.cache;
  po.cache_bytes = o.cache_mb << 20;
  po.reduced_decode = o.reduced_decode;
  po.skip_corrupt = o.skip_corrupt;
  po.transform.size = s.image_size;
  po.transform.channels = s.channels;
  po.transform.train = s.train;
  po.transform.augment = parse_augment(resolve_augment(o, data));
  po.transform.pad = std::max<int64_t>(1, s.image_size / 8);
  po.transform.mean = data.dataset->info().mean;
  po.transform.std = data.dataset->info().std;
  po.channels_last = s.channels_last;
  po.device = s.device;
  return std::make_unique<Pipeline>(data.dataset, po);
}

}  // namespace dlscale::data
