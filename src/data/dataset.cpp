#include "data/dataset.h"

#include <fmt/format.h>

#include "core/error.h"
#include "data/data_format.h"
#include "data/transforms.h"

namespace dlscale::data {

namespace {

constexpr int kMaxDataThreads = 256;
constexpr int kMaxPrefetch = 64;
constexpr int64_t kMaxShuffleBuffer = int64_t{1} << 24;
constexpr int64_t kMaxSyntheticTest = int64_t{1} << 24;
constexpr int64_t kMaxCacheMb = int64_t{1} << 30;  // 1 PiB: past it a typo

/// "synthetic, fashion-mnist, idx:DIR, ...": every form --data takes.
std::string data_forms() {
  std::string forms = "synthetic, fashion-mnist";
  for (const DataFormat& f : data_formats()) forms += fmt::format(", {}:{}", f.kind, f.file_location ? "PATH" : "DIR");
  return forms;
}

}  // namespace

std::string to_string(Split split) { return split == Split::kTrain ? "train" : "test"; }

DataSpec parse_data_spec(const std::string& text) {
  if (text == "synthetic") return {"synthetic", ""};
  if (text == "fashion-mnist") return {"idx", kFashionMnistDir};
  const size_t colon = text.find(':');
  DLSCALE_CHECK(colon != std::string::npos, "unknown --data '{}' (allowed: {})", text, data_forms());
  DataSpec spec{text.substr(0, colon), text.substr(colon + 1)};
  DLSCALE_CHECK(find_data_format(spec.kind) != nullptr,
                "unknown --data kind '{}' in '{}' (allowed: {})", spec.kind, text, data_forms());
  DLSCALE_CHECK(!spec.path.empty(), "--data {}: the path after '{}:' is empty", text, spec.kind);
  return spec;
}

namespace {

constexpr EnumNames<AugmentChoice, 5> kAugments{"--augment",
                                                {{{AugmentChoice::kAuto, "auto"},
                                                  {AugmentChoice::kNone, "none"},
                                                  {AugmentChoice::kFlip, "flip"},
                                                  {AugmentChoice::kCropFlip, "crop-flip"},
                                                  {AugmentChoice::kRrcFlip, "rrc-flip"}}}};
constexpr EnumNames<DataOrder, 2> kOrders{
    "--data-order", {{{DataOrder::kGlobal, "global"}, {DataOrder::kStreaming, "streaming"}}}};

}  // namespace

const EnumNames<AugmentChoice, 5>& enum_names(AugmentChoice) { return kAugments; }
const EnumNames<DataOrder, 2>& enum_names(DataOrder) { return kOrders; }

void check_data_options(const DataOptions& o) {
  parse_data_spec(o.spec);
  DLSCALE_CHECK(o.threads >= 1 && o.threads <= kMaxDataThreads,
                "--data-threads must be in [1, {}] (got {})", kMaxDataThreads, o.threads);
  DLSCALE_CHECK(o.prefetch >= 0 && o.prefetch <= kMaxPrefetch,
                "--prefetch must be in [0, {}] (got {})", kMaxPrefetch, o.prefetch);
  DLSCALE_CHECK(o.shuffle_buffer >= 1 && o.shuffle_buffer <= kMaxShuffleBuffer,
                "--shuffle-buffer must be in [1, {}] (got {})", kMaxShuffleBuffer, o.shuffle_buffer);
  DLSCALE_CHECK(o.synthetic_test >= 1 && o.synthetic_test <= kMaxSyntheticTest,
                "--synthetic-test must be in [1, {}] (got {})", kMaxSyntheticTest, o.synthetic_test);
  DLSCALE_CHECK(o.cache_mb >= 0 && o.cache_mb <= kMaxCacheMb, "--cache-mb must be in [0, {}] (got {})",
                kMaxCacheMb, o.cache_mb);
  DLSCALE_CHECK(o.cache_mb == 0 || o.cache, "--cache-mb is --cache's budget: add --cache");
}

std::unique_ptr<Dataset> open_dataset(const DataSpec& spec, Split split, int64_t channels,
                                      ShardPick pick) {
  DLSCALE_ASSERT(pick.of >= 1 && pick.part >= 0 && pick.part < pick.of);
  const DataFormat& format = data_format(spec.kind);
  if (!format.record_shards) check_shards_for_parts(1, pick.of);  // one shard
  return format.open(spec.path, split, channels, pick);
}

void check_shards_for_parts(int64_t shards, int64_t parts) {
  DLSCALE_CHECK(shards >= parts,
                "--data-order streaming gives each worker its own shards: {} shard(s) cannot feed {} "
                "workers (pack more shards, or use --data-order global)",
                shards, parts);
}

void imagenet_normalisation(int64_t channels, std::vector<float>& mean, std::vector<float>& std) {
  if (channels == 3) {
    mean = {0.485f, 0.456f, 0.406f};
    std = {0.229f, 0.224f, 0.225f};
  } else {
    mean = {0.299f * 0.485f + 0.587f * 0.456f + 0.114f * 0.406f};
    std = {0.299f * 0.229f + 0.587f * 0.224f + 0.114f * 0.225f};
  }
}

void check_labels(const Dataset& d, int64_t classes) {
  for (int64_t i = 0; i < d.info().size; ++i) {
    const int64_t label = d.label(i);
    DLSCALE_CHECK(label >= 0 && label < classes,
                  "{}: label {} is outside the {} classes [0, {})", d.where(i), label, classes,
                  classes);
  }
}

}  // namespace dlscale::data
