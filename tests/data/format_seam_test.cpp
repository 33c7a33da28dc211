// A data format written here in the test tree only, as docs/architecture.md's
// recipe says ("Data": a Dataset of its own and one entry in the format
// table): "toypix", one file of grey images. Registered at run time, it is
// found by --data, recognised as a bare path, inspected and verified by the
// data tools, and trains over two workers as over one, with no file of src/
// naming it (issue 43's recipes).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <sstream>

#include "core/error.h"
#include "data/data_format.h"
#include "data/data_tools.h"
#include "data/data_util.h"
#include "libtorch/models/layers.h"
#include "libtorch/models/model.h"
#include "libtorch/train/trainer.h"
#include "train/inproc_training.h"

namespace dlscale::data {
namespace {

constexpr int64_t kSide = 8;
constexpr int64_t kClasses = 4;

/// "toypix N S K\n", then N records: a label byte and S×S grey pixels.
class ToyPixDataset : public Dataset {
 public:
  explicit ToyPixDataset(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::string magic;
    int64_t n = 0, side = 0, classes = 0;
    in >> magic >> n >> side >> classes;
    in.get();
    DLSCALE_CHECK(in && magic == "toypix" && n > 0 && side > 0 && classes > 0,
                  "{}: not a toypix file", path);
    bytes_.assign(std::istreambuf_iterator<char>(in), {});
    DLSCALE_CHECK(static_cast<int64_t>(bytes_.size()) == n * (1 + side * side),
                  "{}: holds {} bytes of records, not {}", path, bytes_.size(),
                  n * (1 + side * side));
    info_.format = "toypix";
    info_.location = path;
    info_.size = n;
    info_.channels = 1;
    info_.image_size = side;
    info_.num_classes = classes;
    info_.mean = {0.5f};
    info_.std = {0.25f};
    info_.files.push_back(path);
    info_.bytes = static_cast<int64_t>(std::filesystem::file_size(path));
  }
  const DatasetInfo& info() const override { return info_; }
  int64_t label(int64_t index) const override { return bytes_[record(index)]; }
  Image image(int64_t index) const override {
    Image img;
    img.width = img.height = info_.image_size;
    img.channels = 1;
    const auto at = bytes_.begin() + static_cast<std::ptrdiff_t>(record(index) + 1);
    img.pixels.assign(at, at + info_.image_size * info_.image_size);
    return img;
  }
  std::string where(int64_t index) const override {
    return fmt::format("{} record {}", info_.location, index);
  }

 private:
  size_t record(int64_t index) const {
    return static_cast<size_t>(index * (1 + info_.image_size * info_.image_size));
  }
  DatasetInfo info_;
  std::vector<uint8_t> bytes_;
};

void register_toypix() {
  static std::once_flag once;
  std::call_once(once, [] {
    DataFormat f{"toypix", "toypix files"};
    f.file_location = true;
    f.recognises = [](const std::filesystem::path& e) { return e.extension() == ".toypix"; };
    f.open = [](const std::string& path, Split split, int64_t channels,
                ShardPick) -> std::unique_ptr<Dataset> {
      if (split == Split::kTest) throw MissingSplit(path + " has no test split");
      DLSCALE_CHECK(channels == 0 || channels == 1, "{}: grey images, not {} channels", path,
                    channels);
      return std::make_unique<ToyPixDataset>(path);
    };
    register_data_format(f);
  });
}

/// `n` samples; sample i is class i mod K, a bright square at the class's
/// corner over noise.
std::string write_toypix(int64_t n) {
  const std::string path = testing::temp_path("toy") + ".toypix";
  std::ofstream out(path, std::ios::binary);
  out << "toypix " << n << " " << kSide << " " << kClasses << "\n";
  uint32_t noise = 12345;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t label = i % kClasses;
    out.put(static_cast<char>(label));
    for (int64_t y = 0; y < kSide; ++y) {
      for (int64_t x = 0; x < kSide; ++x) {
        noise = noise * 1664525u + 1013904223u;
        const bool lit = (y < kSide / 2) == (label / 2 == 0) && (x < kSide / 2) == (label % 2 == 0);
        out.put(static_cast<char>((lit ? 160 : 0) + (noise >> 26)));
      }
    }
  }
  return path;
}

/// A linear classifier of the flattened image from zeros: ranks that are
/// threads share one generator, so a randomly initialized model would
/// differ between the one- and two-worker runs.
class PixelLinear : public models::ImageModel {
 public:
  explicit PixelLinear(const models::ModelOptions& o) {
    fc_ = register_module("fc", models::Fc(o.image_size * o.image_size, o.num_classes));
    torch::NoGradGuard no_grad;
    for (auto& p : parameters()) p.zero_();
  }
  models::Output forward_image(const torch::Tensor& x) override { return {fc_(x.flatten(1)), {}}; }

 private:
  models::Fc fc_{nullptr};
};

void register_pixel_linear() {
  static std::once_flag once;
  std::call_once(once, [] {
    models::ModelSpec s = models::image_classifier_spec("toy-pixel-linear", "test model");
    s.channels = 1;
    s.default_image_size = 16;  // the data's 8 and 4 must win
    s.default_classes = 10;
    s.make = [](const models::ModelOptions& o) { return std::make_shared<PixelLinear>(o); };
    models::register_model(s);
  });
}

train::TrainOptions toypix_options(const std::string& path, int64_t batch_per_worker) {
  train::TrainOptions o;
  register_pixel_linear();
  o.model.name = "toy-pixel-linear";
  o.data.spec = "toypix:" + path;
  o.data.augment = AugmentChoice::kNone;
  o.data.threads = 1;
  o.run.batch = batch_per_worker;
  o.run.steps = 4;
  o.run.warmup = 1;
  o.run.display_every = 0;
  o.compute.threads = 1;
  o.optimizer.lr = 0.05;
  return o;
}

TEST(FormatSeam, AToyFormatIsFoundInspectedVerifiedAndTrainsOverTwoWorkersAsOverOne) {
  register_toypix();
  const std::string path = write_toypix(32);
  // --data finds it by kind, and a bare path by its recogniser.
  EXPECT_EQ(parse_data_spec("toypix:" + path).kind, "toypix");
  EXPECT_EQ(parse_data_location(path).kind, "toypix");
  std::ostringstream inspected;
  inspect_dataset("toypix:" + path, inspected);
  EXPECT_NE(inspected.str().find("32"), std::string::npos) << inspected.str();
  std::ostringstream progress;
  EXPECT_EQ(verify_dataset("toypix:" + path, progress), 32);

  // A global batch of 8 over one and two in-process ranks.
  const testing::RankZeroRun one_run = testing::train_in_process(1, toypix_options(path, 8));
  const testing::RankZeroRun two_run = testing::train_in_process(2, toypix_options(path, 4));
  const std::vector<torch::Tensor>& one = one_run.parameters;
  const std::vector<torch::Tensor>& two = two_run.parameters;
  ASSERT_EQ(one.size(), two.size());
  for (size_t i = 0; i < one.size(); ++i) {
    EXPECT_TRUE(torch::allclose(one[i], two[i], 1e-5, 1e-6)) << "parameter " << i;
  }
  // It learned, and the data shaped the model: 8×8 grey images of 4 classes.
  EXPECT_LT(two_run.result.steps.back().loss, two_run.result.steps.front().loss);
  EXPECT_EQ(two_run.result.model.image_size, kSide);
  EXPECT_EQ(two_run.result.model.num_classes, kClasses);
  EXPECT_EQ(two_run.result.model.channels, 1);
  EXPECT_THROW(register_data_format(*find_data_format("toypix")), Error);  // the kind is taken
}

}  // namespace
}  // namespace dlscale::data
