#include "data/idx_dataset.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/files.h"
#include "data/data_test_util.h"
#include "data/data_util.h"
#include "data/transforms.h"

namespace dlscale::data {
namespace {

using testing::error_message;
using testing::idx_label;
using testing::idx_pixel;
using testing::write_idx_dataset;

TEST(IdxDataset, ReturnsExactlyThePixelsAndLabelsWrittenGzipOrNot) {
  for (const bool gz : {false, true}) {
    const std::string dir = write_idx_dataset(20, 6, 9, gz);
    for (const Split split : {Split::kTrain, Split::kTest}) {
      const auto d = open_idx(dir, split);
      const int64_t n = split == Split::kTrain ? 20 : 6;
      const int64_t offset = split == Split::kTrain ? 0 : 100000;
      ASSERT_EQ(d->info().size, n);
      EXPECT_EQ(d->info().channels, 1);
      EXPECT_EQ(d->info().image_size, 9);
      int64_t max_label = 0;
      for (int64_t i = 0; i < n; ++i) max_label = std::max<int64_t>(max_label, idx_label(i + offset));
      EXPECT_EQ(d->info().num_classes, max_label + 1);  // 10 for train, 9 for the 6 test labels
      for (int64_t i = 0; i < n; ++i) {
        const Image img = d->image(i);
        ASSERT_EQ(img.pixels.size(), 81u);
        for (int64_t y = 0; y < 9; ++y) {
          for (int64_t x = 0; x < 9; ++x) {
            ASSERT_EQ(img.pixels[static_cast<size_t>(y * 9 + x)], idx_pixel(i + offset, y, x));
          }
        }
        EXPECT_EQ(d->label(i), idx_label(i + offset));
      }
    }
    dlscale::remove_tree(dir);
  }
}

// Normalisation is the train split's exact pixel mean and std, for both splits.
TEST(IdxDataset, NormalisationIsTheTrainSplitsStatistics) {
  const std::string dir = write_idx_dataset(20, 6, 9, false);
  double sum = 0, sum_sq = 0;
  for (int64_t i = 0; i < 20; ++i) {
    for (int64_t y = 0; y < 9; ++y) {
      for (int64_t x = 0; x < 9; ++x) {
        const double v = idx_pixel(i, y, x) / 255.0;
        sum += v;
        sum_sq += v * v;
      }
    }
  }
  const double mean = sum / (20 * 81), stddev = std::sqrt(sum_sq / (20 * 81) - mean * mean);
  for (const Split split : {Split::kTrain, Split::kTest}) {
    const auto d = open_idx(dir, split);
    EXPECT_NEAR(d->info().mean[0], mean, 1e-6);
    EXPECT_NEAR(d->info().std[0], stddev, 1e-6);
  }
  dlscale::remove_tree(dir);
}

TEST(IdxDataset, BadFilesAreNamedInOneLine) {
  const std::string dir = write_idx_dataset(4, 2, 5, false);
  const std::string images = dir + "/train-images-idx3-ubyte";
  const std::string labels = dir + "/train-labels-idx1-ubyte";
  EXPECT_EQ(error_message([&] { open_idx(dir + "/nope", Split::kTrain); }),
            dir + "/nope: no such directory");
  // Truncated pixels.
  const std::string whole = read_file(images);
  write_file_atomic(images, whole.substr(0, whole.size() - 3));
  EXPECT_EQ(error_message([&] { open_idx(dir, Split::kTrain); }),
            images + ": truncated: the file ends inside the pixels");
  // Trailing garbage.
  write_file_atomic(images, whole + "xx");
  EXPECT_EQ(error_message([&] { open_idx(dir, Split::kTrain); }),
            images + ": unexpected bytes after 4 images");
  // A wrong magic number.
  write_file_atomic(images, std::string("\0\0\x08\x01", 4) + whole.substr(4));
  EXPECT_NE(error_message([&] { open_idx(dir, Split::kTrain); }).find(images + ": not an IDX file"),
            std::string::npos);
  write_file_atomic(images, whole);
  // Counts that disagree.
  write_idx_labels(labels, {1, 2, 3});
  EXPECT_EQ(error_message([&] { open_idx(dir, Split::kTrain); }),
            images + " holds 4 images but " + labels + " holds 3 labels");
  std::filesystem::remove(labels);
  EXPECT_EQ(error_message([&] { open_idx(dir, Split::kTrain); }),
            dir + ": no train-labels-idx1-ubyte[.gz] file in this directory");
  // A corrupt gzip stream.
  const std::string gz_dir = write_idx_dataset(4, 2, 5, true);
  const std::string gz = gz_dir + "/train-images-idx3-ubyte.gz";
  std::string bytes = read_file(gz);
  for (size_t i = 20; i < bytes.size() - 8; ++i) bytes[i] = static_cast<char>(bytes[i] ^ 0x5a);
  write_file_atomic(gz, bytes);
  EXPECT_NE(error_message([&] { open_idx(gz_dir, Split::kTrain); }).find(gz + ": "), std::string::npos);
  dlscale::remove_tree(dir);
  dlscale::remove_tree(gz_dir);
  const std::string empty = write_idx_dataset(0, 0, 5, false);
  EXPECT_EQ(error_message([&] { open_idx(empty, Split::kTrain); }),
            empty + "/train-images-idx3-ubyte: holds no samples");
  dlscale::remove_tree(empty);
}

Image ramp(int64_t h, int64_t w, int64_t c) {
  Image img;
  img.height = h;
  img.width = w;
  img.channels = c;
  for (int64_t i = 0; i < h * w * c; ++i) img.pixels.push_back(static_cast<uint8_t>(i * 7 % 256));
  return img;
}

TEST(Transforms, EvalOfTheTargetSizeOnlyNormalises) {
  const Image img = ramp(4, 4, 3);
  TransformOptions o;
  o.size = 4;
  o.channels = 3;
  o.train = false;
  o.mean = {0.5f, 0.25f, 0.f};
  o.std = {0.5f, 1.f, 2.f};
  std::vector<float> chw(48), hwc(48);
  transform_image(img, o, 1, chw.data(), OutputLayout::chw(3, 4));
  transform_image(img, o, 1, hwc.data(), OutputLayout::hwc(3, 4));
  for (int64_t c = 0; c < 3; ++c) {
    for (int64_t p = 0; p < 16; ++p) {
      const float want = (img.pixels[static_cast<size_t>(p * 3 + c)] / 255.f - o.mean[c]) / o.std[c];
      EXPECT_NEAR(chw[static_cast<size_t>(c * 16 + p)], want, 1e-5);
      EXPECT_NEAR(hwc[static_cast<size_t>(p * 3 + c)], want, 1e-5);
    }
  }
}

TEST(Transforms, AugmentationDependsOnTheSeedOnlyAndKeepsPixels) {
  const Image img = ramp(8, 8, 1);
  TransformOptions o;
  o.size = 8;
  o.channels = 1;
  o.augment = Augment::kCropFlip;
  o.pad = 2;
  o.mean = {0.f};
  o.std = {1.f};
  std::vector<float> a(64), b(64);
  bool some_differ = false;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    transform_image(img, o, seed, a.data(), OutputLayout::chw(1, 8));
    transform_image(img, o, seed, b.data(), OutputLayout::chw(1, 8));
    EXPECT_EQ(a, b);
    std::vector<float> plain(64);
    TransformOptions none = o;
    none.augment = Augment::kNone;
    transform_image(img, none, seed, plain.data(), OutputLayout::chw(1, 8));
    some_differ = some_differ || a != plain;
    // Every output pixel is an input pixel or padding (0).
    for (float v : a) {
      const int p = static_cast<int>(std::lround(v * 255));
      EXPECT_TRUE(p == 0 || std::count(img.pixels.begin(), img.pixels.end(), p) > 0) << p;
    }
  }
  EXPECT_TRUE(some_differ);
  EXPECT_THROW(parse_augment("rotate"), Error);
}

TEST(Transforms, ResizeOfAConstantImageIsConstant) {
  Image img;
  img.height = 5;
  img.width = 7;
  img.channels = 3;
  img.pixels.assign(105, 77);
  const Image out = resize_region(img, 0, 0, 7, 5, 3, 11);
  EXPECT_EQ(out.height, 3);
  EXPECT_EQ(out.width, 11);
  for (uint8_t p : out.pixels) EXPECT_EQ(p, 77);
}

}  // namespace
}  // namespace dlscale::data
