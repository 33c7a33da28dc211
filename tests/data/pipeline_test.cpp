#include "libtorch/data/pipeline.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "core/files.h"
#include "data/data_test_util.h"
#include "data/encoded_dataset.h"
#include "data/sampler.h"

namespace dlscale::data {
namespace {

/// Sample i is a 6×6 image of value i (mod 256) and label i mod 5; the
/// samples listed in `corrupt` throw as a corrupt file would.
class FakeDataset : public Dataset {
 public:
  explicit FakeDataset(int64_t size, std::vector<int64_t> corrupt = {})
      : corrupt_(std::move(corrupt)) {
    info_.format = "fake";
    info_.location = "mem";
    info_.size = size;
    info_.channels = 1;
    info_.image_size = 6;
    info_.num_classes = 5;
    info_.mean = {0.f};
    info_.std = {1.f};
  }
  const DatasetInfo& info() const override { return info_; }
  int64_t label(int64_t i) const override { return i % 5; }
  Image image(int64_t i) const override {
    for (int64_t c : corrupt_) DLSCALE_CHECK(i != c, "{}: corrupt", where(i));
    Image img;
    img.height = img.width = 6;
    img.channels = 1;
    img.pixels.assign(36, static_cast<uint8_t>(i % 256));
    return img;
  }
  std::string where(int64_t i) const override { return "fake record " + std::to_string(i); }

 private:
  DatasetInfo info_;
  std::vector<int64_t> corrupt_;
};

PipelineOptions options(int threads, int prefetch) {
  PipelineOptions o;
  o.global_batch = 12;
  o.threads = threads;
  o.prefetch = prefetch;
  o.transform.size = 6;
  o.transform.channels = 1;
  o.transform.augment = Augment::kCropFlip;
  o.transform.pad = 1;
  o.transform.mean = {0.f};
  o.transform.std = {1.f};
  return o;
}

std::vector<Batch> first_batches(const std::shared_ptr<Dataset>& d, const PipelineOptions& o,
                                 int64_t n) {
  Pipeline p(d, o);
  std::vector<Batch> out;
  for (int64_t s = 0; s < n; ++s) {
    const Batch b = p.batch(s);
    out.push_back({{{kImage, b.inputs.at(kImage).clone()}}, {{kLabel, b.targets.at(kLabel).clone()}}});
  }
  return out;
}

// Threads and prefetch change when a batch is made, never what it holds.
TEST(Pipeline, ThreadsAndPrefetchDoNotChangeTheBatches) {
  auto d = std::make_shared<FakeDataset>(40);
  const auto reference = first_batches(d, options(1, 0), 7);  // crosses an epoch
  for (const auto& [threads, prefetch] : {std::pair{3, 0}, std::pair{1, 2}, std::pair{2, 5}}) {
    const auto got = first_batches(d, options(threads, prefetch), 7);
    for (size_t s = 0; s < got.size(); ++s) {
      EXPECT_TRUE(torch::equal(got[s].inputs.at(kImage), reference[s].inputs.at(kImage))) << threads << " " << prefetch;
      EXPECT_TRUE(torch::equal(got[s].targets.at(kLabel), reference[s].targets.at(kLabel)));
    }
  }
}

TEST(Pipeline, RankSlicesAreTheGlobalBatchAndLabelsFollowTheSampler) {
  auto d = std::make_shared<FakeDataset>(40);
  const auto whole = first_batches(d, options(2, 1), 3);
  SamplerOptions so;
  so.dataset_size = 40;
  so.global_batch = 12;
  so.seed = 42;
  GlobalSampler sampler(so);
  for (int64_t s = 0; s < 3; ++s) {
    std::vector<int64_t> want;
    for (int64_t i : sampler.indices(s, 0, 12)) want.push_back(i % 5);
    EXPECT_TRUE(torch::equal(whole[s].targets.at(kLabel), torch::tensor(want, torch::kInt64)));
  }
  for (const int64_t world : {2, 3}) {
    std::vector<std::vector<Batch>> parts;
    for (int64_t r = 0; r < world; ++r) {
      PipelineOptions o = options(1, 2);
      o.rank = r;
      o.world_size = world;
      parts.push_back(first_batches(d, o, 3));
    }
    for (int64_t s = 0; s < 3; ++s) {
      std::vector<torch::Tensor> in, lab;
      for (auto& p : parts) {
        in.push_back(p[s].inputs.at(kImage));
        lab.push_back(p[s].targets.at(kLabel));
      }
      EXPECT_TRUE(torch::equal(torch::cat(in), whole[s].inputs.at(kImage))) << world;
      EXPECT_TRUE(torch::equal(torch::cat(lab), whole[s].targets.at(kLabel))) << world;
    }
  }
}

// Decoding only each JPEG's crop changes nothing in the batches: at 32 no
// crop of these 80x60 images is twice the output, so the scale is 1 and
// only the part differs from --full-decode.
TEST(Pipeline, DecodingOnlyTheCropGivesTheBatchesOfAFullDecode) {
  testing::TempDir dir;
  for (int i = 0; i < 24; ++i) {
    Image img;
    img.width = 80;
    img.height = 60;
    img.channels = 3;
    for (int64_t p = 0; p < 80 * 60 * 3; ++p) img.pixels.push_back(static_cast<uint8_t>((p * 7 + i * 31) % 251));
    const std::vector<uint8_t> jpeg = encode_jpeg(img, 90);
    std::filesystem::create_directories(dir.file(i % 2 ? "f/b" : "f/a"));
    write_file_atomic(dir.file(std::string(i % 2 ? "f/b/" : "f/a/") + std::to_string(i) + ".jpg"),
                      std::string(jpeg.begin(), jpeg.end()));
  }
  std::shared_ptr<Dataset> d = open_folder(dir.file("f"), Split::kTrain, 3);
  PipelineOptions o = options(2, 1);
  o.transform.size = 32;
  o.transform.channels = 3;
  o.transform.augment = Augment::kResizedCropFlip;
  o.transform.mean = {0.f, 0.f, 0.f};
  o.transform.std = {1.f, 1.f, 1.f};
  const auto whole = first_batches(d, o, 4);
  o.reduced_decode = true;
  Pipeline p(d, o);
  for (int64_t s = 0; s < 4; ++s) {
    EXPECT_TRUE(torch::equal(p.batch(s).inputs.at(kImage), whole[static_cast<size_t>(s)].inputs.at(kImage))) << s;
  }
  EXPECT_GT(p.stats().region_decodes, 24);  // of 48
  EXPECT_EQ(p.stats().reduced_decodes, 0);
}

TEST(Pipeline, ChannelsLastHoldsTheSameValues) {
  auto d = std::make_shared<FakeDataset>(40);
  PipelineOptions o = options(2, 1);
  o.channels_last = true;
  const auto nhwc = first_batches(d, o, 2);
  const auto nchw = first_batches(d, options(2, 1), 2);
  EXPECT_TRUE(nhwc[0].inputs.at(kImage).is_contiguous(torch::MemoryFormat::ChannelsLast));
  EXPECT_TRUE(torch::equal(nhwc[1].inputs.at(kImage), nchw[1].inputs.at(kImage)));
}

TEST(Pipeline, ACorruptSampleFailsTheBatchOrIsSkippedAndCounted) {
  // Unshuffled, so sample 3 is in batch 0 and its replacement is sample 4.
  auto d = std::make_shared<FakeDataset>(24, std::vector<int64_t>{3});
  for (const int prefetch : {0, 2}) {
    PipelineOptions o = options(2, prefetch);
    o.shuffle = false;
    Pipeline p(d, o);
    try {
      p.batch(0);
      FAIL() << "no error";
    } catch (const Error& e) {
      EXPECT_STREQ(e.what(), "fake record 3: corrupt");
    }
    o.skip_corrupt = true;
    Pipeline skipping(d, o);
    const Batch b = skipping.batch(0);
    EXPECT_EQ(b.targets.at(kLabel)[3].item<int64_t>(), 4);
    EXPECT_FLOAT_EQ(b.inputs.at(kImage)[3][0][2][2].item<float>(), 4.f / 255.f);
    skipping.batch(1);
    // Prefetching may already have built step 2 (epoch 1 meets sample 3 again).
    if (prefetch == 0) {
      EXPECT_EQ(skipping.stats().skipped, 1);
    }
    EXPECT_GE(skipping.stats().skipped, 1);
    EXPECT_GE(skipping.stats().batches, 2);
    EXPECT_GE(skipping.stats().samples, 24);
  }
}

TEST(Pipeline, CacheServesRepeatsFromMemory) {
  auto d = std::make_shared<FakeDataset>(12);
  PipelineOptions o = options(1, 0);
  o.cache = true;
  Pipeline p(d, o);
  for (int64_t s = 0; s < 3; ++s) p.batch(s);
  EXPECT_EQ(p.stats().cache_hits, 24);  // each batch is all 12 samples; the first from disk
  EXPECT_EQ(p.stats().cache_bytes, 12 * 36);
  EXPECT_EQ(p.stats().cache_full, 0);
}

// --cache-mb: the cache keeps samples until its budget (here 5 images of 36
// bytes in 200 bytes), then the rest are decoded each time; the result is
// the same batches.
TEST(Pipeline, CacheStopsGrowingAtItsBudget) {
  auto d = std::make_shared<FakeDataset>(12);
  PipelineOptions o = options(1, 0);
  o.cache = true;
  o.cache_bytes = 200;
  Pipeline bounded(d, o);
  Pipeline plain(d, options(1, 0));
  for (int64_t s = 0; s < 3; ++s) {
    EXPECT_TRUE(torch::equal(bounded.batch(s).inputs.at(kImage), plain.batch(s).inputs.at(kImage))) << s;
  }
  const PipelineStats st = bounded.stats();
  EXPECT_EQ(st.cache_bytes, 5 * 36);
  EXPECT_EQ(st.cache_hits, 2 * 5);      // steps 1 and 2 find the 5 kept samples
  EXPECT_EQ(st.cache_full, 3 * 7);      // and decode the 7 others each step
}

}  // namespace
}  // namespace dlscale::data
