// Image folders, WebDataset and TFRecord shards: exact pixels back, the
// pack → inspect → verify round trip, and every bad-input message.
#include "data/encoded_dataset.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <sstream>

#include "core/error.h"
#include "data/data_test_util.h"
#include "data/data_tools.h"
#include "data/staging.h"
#include "data/tar_shards.h"
#include "data/tfrecord.h"

namespace dlscale::data {
namespace {

using testing::contains;
using testing::error_message;
using testing::read_bytes;
using testing::TempDir;
using testing::write_bytes;

/// Image k of the test folder: 6×6 RGB, every byte a function of (k, position).
Image test_image(int64_t k) {
  Image img;
  img.height = img.width = 6;
  img.channels = 3;
  for (int64_t i = 0; i < 108; ++i) img.pixels.push_back(static_cast<uint8_t>((k * 41 + i * 13) % 256));
  return img;
}

void write_png(const std::string& path, const Image& img) {
  const std::vector<uint8_t> png = encode_png(img);
  write_bytes(path, std::string(png.begin(), png.end()));
}

/// root/{ant,bee,cat}/NN.png: 2, 3 and 1 images; a README that is not an image.
std::string write_folder(const TempDir& dir) {
  const std::string root = dir.file("folder");
  int64_t k = 0;
  const std::vector<std::pair<std::string, int>> classes = {{"ant", 2}, {"bee", 3}, {"cat", 1}};
  for (const auto& [name, n] : classes) {
    std::filesystem::create_directories(root + "/" + name);
    for (int i = 0; i < n; ++i) write_png(root + "/" + name + "/" + std::to_string(i) + ".png", test_image(k++));
  }
  write_bytes(root + "/bee/README.txt", "not an image");
  return root;
}

/// (label, pixels) of every sample, sorted: compares datasets in any order.
std::vector<std::pair<int64_t, std::vector<uint8_t>>> contents(const Dataset& d) {
  std::vector<std::pair<int64_t, std::vector<uint8_t>>> out;
  for (int64_t i = 0; i < d.info().size; ++i) out.emplace_back(d.label(i), d.image(i).pixels);
  std::sort(out.begin(), out.end());
  return out;
}

TEST(ImageFolder, ReadsExactPixelsWithClassesSortedByName) {
  TempDir dir;
  const auto d = open_folder(write_folder(dir), Split::kTrain, 3);
  ASSERT_EQ(d->info().size, 6);
  EXPECT_EQ(d->info().num_classes, 3);
  EXPECT_EQ(d->info().image_size, 6);
  EXPECT_EQ(d->info().format, "folder");
  const std::vector<int64_t> labels = {0, 0, 1, 1, 1, 2};
  for (int64_t i = 0; i < 6; ++i) {
    EXPECT_EQ(d->label(i), labels[static_cast<size_t>(i)]);
    EXPECT_EQ(d->image(i).pixels, test_image(i).pixels) << i;
  }
  // The same images decoded to one channel (the model's) are gray.
  EXPECT_EQ(open_folder(dir.file("folder"), Split::kTrain, 1)->image(0).channels, 1);
}

// Only images count: any case of .jpg/.jpeg/.png, through symbolic links;
// hidden files, directories and other files are skipped. Names sort
// bytewise within each class.
TEST(ImageFolder, ListsImagesOnlySortedByName) {
  TempDir dir;
  const std::string root = write_folder(dir);
  const std::string png = read_bytes(root + "/ant/0.png");
  write_bytes(root + "/ant/B.PNG", png);
  write_bytes(root + "/ant/.hidden.png", png);
  write_bytes(root + "/ant/a.png.txt", png);
  std::filesystem::create_directories(root + "/ant/dir.jpg");
  std::filesystem::create_symlink(root + "/ant/0.png", root + "/ant/link.png");
  std::filesystem::create_symlink(root + "/nowhere.png", root + "/ant/dangling.png");
  const auto d = open_folder(root, Split::kTrain, 3);
  ASSERT_EQ(d->info().size, 8);
  const std::vector<std::string> ant = {"0.png", "1.png", "B.PNG", "link.png"};
  for (size_t i = 0; i < ant.size(); ++i) {
    EXPECT_EQ(d->where(static_cast<int64_t>(i)), root + "/ant/" + ant[i]);
    EXPECT_EQ(d->label(static_cast<int64_t>(i)), 0);
  }
  EXPECT_EQ(d->where(4), root + "/bee/0.png");
  EXPECT_EQ(d->label(4), 1);
  EXPECT_EQ(d->image(3).pixels, d->image(0).pixels);  // the link reads its target
  EXPECT_EQ(d->info().files.size(), 8u);
}

TEST(ImageFolder, BadInputIsNamed) {
  TempDir dir;
  const std::string root = write_folder(dir);
  EXPECT_EQ(error_message([&] { open_folder(root + "/none", Split::kTrain, 3); }),
            root + "/none: no such directory");
  std::filesystem::create_directories(root + "/dog");
  EXPECT_EQ(error_message([&] { open_folder(root, Split::kTrain, 3); }),
            root + "/dog: empty class folder (no .jpg, .jpeg or .png files)");
  std::filesystem::remove(root + "/dog");
  write_bytes(root + "/cat/0.png", read_bytes(root + "/cat/0.png").substr(0, 30));
  const auto d = open_folder(root, Split::kTrain, 3);
  EXPECT_TRUE(contains(error_message([&] { d->image(5); }), root + "/cat/0.png: corrupt PNG"));
  EXPECT_EQ(error_message([&] { open_folder(root, Split::kTest, 3); }),
            root + ": no val/ or test/ folder for the test split");
}

TEST(PackedShards, PackInspectVerifyRoundTripForBothFormats) {
  TempDir dir;
  const std::string root = write_folder(dir);
  const auto folder = open_folder(root, Split::kTrain, 3);
  for (const std::string format : {"wds", "tfrecord"}) {
    SCOPED_TRACE(format);
    PackOptions o;
    o.source = "folder:" + root;
    o.destination = dir.file(format);
    o.format = format;
    o.shards = 4;
    o.encoding = "png";  // lossless: the shards must hold exactly the folder's pixels
    std::ostringstream progress;
    EXPECT_EQ(pack_dataset(o, progress), 6);
    const auto packed = format == "wds" ? open_wds(o.destination, Split::kTrain, 3)
                                        : open_tfrecord(o.destination, Split::kTrain, 3);
    EXPECT_EQ(packed->info().files.size(), 4u);
    EXPECT_EQ(contents(*packed), contents(*folder));
    std::ostringstream inspect;
    inspect_dataset(o.destination, inspect);
    EXPECT_TRUE(contains(inspect.str(), "train: 6 samples, 3 classes (labels 0..2; 1 to 3 per class), "
                                        "first image 3x6x6"));
    EXPECT_TRUE(contains(inspect.str(), "train: 4 file(s)"));
    EXPECT_EQ(verify_dataset(o.destination, progress), 6);
  }
  // Plain tar reads the WebDataset shards.
  int status = 0;
  const std::string listing =
      testing::shell_output("tar tf " + dir.file("wds") + "/train-00000-of-00004.tar", status);
  EXPECT_EQ(status, 0);
  EXPECT_TRUE(contains(listing, ".png\n"));
  EXPECT_TRUE(contains(listing, ".cls\n"));
}

TEST(PackedShards, CorruptShardsNameTheFileAndRecord) {
  TempDir dir;
  PackOptions o;
  o.source = write_folder(dir);
  o.destination = dir.file("tfr");
  o.format = "tfrecord";
  o.encoding = "png";
  std::ostringstream progress;
  pack_dataset(o, progress);
  const std::string shard = o.destination + "/train-00000-of-00001";
  const std::string good = read_bytes(shard);
  // A flipped byte inside record 2's payload: its data CRC no longer matches.
  const std::vector<RecordSpan> spans = index_tfrecord(shard, true);
  std::string bad = good;
  // Inside the PNG's pixel data, so the Example still parses and only the CRC tells.
  const size_t png = bad.find("\x89PNG", spans[2].offset);
  ASSERT_LT(png, spans[2].offset + spans[2].length);
  bad[png + 60] = static_cast<char>(bad[png + 60] ^ 0x40);
  write_bytes(shard, bad);
  EXPECT_TRUE(contains(error_message([&] { verify_dataset(o.destination, progress); }),
                       shard + ": record 2"));
  const auto d = open_tfrecord(o.destination, Split::kTrain, 3);
  bool named = false;
  for (int64_t i = 0; i < d->info().size; ++i) {
    try {
      d->image(i);
    } catch (const Error& e) {
      named = contains(e.what(), shard + ": record 2");
    }
  }
  EXPECT_TRUE(named);
  // A truncated shard fails at open.
  write_bytes(shard, good.substr(0, good.size() - 7));
  EXPECT_TRUE(contains(error_message([&] { open_tfrecord(o.destination, Split::kTrain, 3); }), shard));
}

TEST(PackedShards, WebDatasetWithoutLabelsOrWithBadLabelsIsRefused) {
  TempDir dir;
  const std::string png = [] {
    const auto b = encode_png(test_image(0));
    return std::string(b.begin(), b.end());
  }();
  {
    TarWriter w(dir.file("a.tar"));
    w.add("s1.png", png);
    w.finish();
  }
  EXPECT_EQ(error_message([&] { open_wds(dir.file("a.tar"), Split::kTrain, 3); }),
            dir.file("a.tar") + " sample s1: no .cls member (the label)");
  {
    TarWriter w(dir.file("a.tar"));
    w.add("s1.png", png);
    w.add("s1.cls", "seven");
    w.finish();
  }
  EXPECT_EQ(error_message([&] { open_wds(dir.file("a.tar"), Split::kTrain, 3); }),
            dir.file("a.tar") + " sample s1: the .cls member 'seven' is not a non-negative integer label");
}

TEST(Staging, CopiesOnceAndTheCopyReadsTheSame) {
  TempDir dir;
  const std::string root = write_folder(dir);
  const auto d = open_folder(root, Split::kTrain, 3);
  const StageResult first = stage_files(d->info().files, root, dir.file("stage"));
  EXPECT_EQ(first.location, dir.file("stage"));
  EXPECT_GT(first.bytes_copied, 0);
  EXPECT_EQ(stage_files(d->info().files, root, dir.file("stage")).bytes_copied, 0);
  EXPECT_EQ(contents(*open_folder(first.location, Split::kTrain, 3)), contents(*d));
}

}  // namespace
}  // namespace dlscale::data
