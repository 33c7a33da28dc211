// Real data end to end through the binary: N worker processes on an IDX
// dataset reach one worker's weights on the same global batches, the record
// says what was read, and bad data fails before training in one line.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "core/files.h"
#include "data/data_util.h"
#include "data/image_codec.h"
#include "process_util.h"
#include "weights_util.h"

namespace dlscale {
namespace {

using testing::closeness;
using testing::fails;
using testing::run_dlscale;
using testing::train;
using testing::TrainRun;

// 36 training samples, global batch 12: 3 steps per epoch, so 5 steps cross
// into a second (reshuffled) epoch.
const std::string& idx_dir() {
  static const std::string dir = testing::write_idx_dataset(36, 12, 28, true);
  return dir;
}

std::string lenet_on_idx() {
  return "train --model lenet --dropout 0 --threads 1 --steps 5 --warmup 1 --optimizer momentum "
         "--lr 0.05 --display-every 0 --global-batch 12 --first-bucket-mb 0.01 --bucket-mb 0.2 "
         "--data idx:" + idx_dir();
}

TEST(DataTraining, TwoAndThreeWorkersMatchOneWorkerOnIdxData) {
  const TrainRun one = train(lenet_on_idx());
  ASSERT_FALSE(one.weights.empty());
  const nlohmann::json& d = one.record["results"]["data"];
  EXPECT_EQ(d["spec"], "idx:" + idx_dir());
  EXPECT_EQ(d["format"], "idx");
  EXPECT_EQ(d["samples"], 36);
  EXPECT_EQ(d["steps_per_epoch"], 3);
  EXPECT_EQ(d["augment"], "crop-flip");
  EXPECT_GE(d["pipeline_batches"].get<int64_t>(), 5);
  EXPECT_EQ(one.record["inputs"]["data"], "idx:" + idx_dir());
  EXPECT_EQ(one.record["inputs"]["image_size"], 28);
  EXPECT_EQ(one.record["inputs"]["num_classes"], 10);
  for (const int n : {2, 3}) {
    const TrainRun many = train(lenet_on_idx() + " --workers " + std::to_string(n));
    EXPECT_LE(closeness(many.weights, one.weights, 1e-5, 1e-7), 1.0) << n;
    EXPECT_EQ(many.record["results"]["comm"]["replicas_identical"], true);
  }
  // Another seed reads another order (and so ends elsewhere).
  const TrainRun other = train(lenet_on_idx() + " --seed 5");
  EXPECT_GT(closeness(other.weights, one.weights, 1e-5, 1e-7), 1.0);
}

TEST(DataTraining, PrefetchAndThreadsDoNotChangeTheResult) {
  const TrainRun base = train(lenet_on_idx() + " --prefetch 0 --data-threads 1");
  const TrainRun fast = train(lenet_on_idx() + " --prefetch 3 --data-threads 2 --cache");
  EXPECT_LE(closeness(fast.weights, base.weights, 0, 0), 1.0);
}

TEST(DataTraining, FashionMnistFromDebiansPackageTrains) {
  ASSERT_TRUE(std::filesystem::exists("/usr/share/datasets/fashion-mnist"))
      << "scripts/setup.sh installs dataset-fashion-mnist";
  const auto o = run_dlscale(
      "train --model lenet --data fashion-mnist --batch 32 --steps 3 --warmup 1 --threads 1");
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("data idx:/usr/share/datasets/fashion-mnist (60,000 samples, 1875 "
                       "steps/epoch)"),
            std::string::npos)
      << o.out;
  EXPECT_NE(o.out.find("input pipeline (rank 0): busy"), std::string::npos) << o.out;
}

TEST(DataTraining, BadDataFailsBeforeTrainingInOneLine) {
  const std::string lenet = "train --model lenet --steps 2 --warmup 1 --threads 1 ";
  EXPECT_EQ(fails(lenet + "--data nonsense"),
            "dlscale: error: unknown --data 'nonsense' (allowed: synthetic, fashion-mnist, idx:DIR, "
            "wds:PATH, folder:DIR, tfrecord:PATH)\n");
  EXPECT_EQ(fails(lenet + "--data idx:/no/such/dir"), "dlscale: error: /no/such/dir: no such directory\n");
  EXPECT_EQ(fails(lenet + "--data-threads 0"),
            "dlscale: error: --data-threads must be in [1, 256] (got 0)\n");
  EXPECT_EQ(fails(lenet + "--data idx:" + idx_dir() + " --batch 40"),
            "dlscale: error: the dataset holds 36 samples, fewer than one global batch of 40\n");
  const std::string labels = fails(lenet + "--data idx:" + idx_dir() + " --classes 5");
  EXPECT_NE(labels.find("train-labels-idx1-ubyte.gz"), std::string::npos) << labels;
  EXPECT_NE(labels.find("is outside the 5 classes [0, 5)"), std::string::npos) << labels;
  EXPECT_EQ(fails("train --model resnet18 --steps 2 --warmup 1 --data idx:" + idx_dir()),
            "dlscale: error: --data idx:" + idx_dir() +
                ": the images have 1 channel(s) but the model takes 3 (choose a 1-channel "
                "model, e.g. lenet for 1)\n");
  // Two workers: the error comes once, from the launcher's first failing rank.
  const std::string two = fails(lenet + "--workers 2 --data idx:/no/such/dir");
  EXPECT_NE(two.find("/no/such/dir: no such directory"), std::string::npos) << two;
}

TEST(DataTools, PackInspectVerifyAndBenchThroughTheBinary) {
  const std::string out = testing::temp_path("wds");
  auto o = run_dlscale("data pack idx:" + idx_dir() + " " + out + " --format wds --shards 3");
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(o.out, "packed 48 samples into " + out + "\n");  // 36 train + 12 test
  o = run_dlscale("data inspect " + out);
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("train: 36 samples, 10 classes"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("test: 12 samples"), std::string::npos) << o.out;
  o = run_dlscale("data verify " + out);
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(o.out, "verified 48 samples: all readable\n");
  const std::string json = testing::temp_path("bench.json");
  o = run_dlscale("data bench --data wds:" + out + " --batch 12 --steps 3 --warmup 1 --json " + json);
  EXPECT_EQ(o.code, 0) << o.err;
  const nlohmann::json record = nlohmann::json::parse(read_file(json));
  EXPECT_EQ(record["schema"], "dlscale.data_bench/1");
  EXPECT_GT(record["results"]["samples_per_sec"].get<double>(), 0);
  // The flags as given, recorded through their tables (the data's and the
  // bench's); the image size and channels as resolved from the data.
  const nlohmann::json& in = record["inputs"];
  EXPECT_EQ(in["data"], "wds:" + out);
  EXPECT_EQ(in["batch"], 12);
  EXPECT_EQ(in["steps"], 3);
  EXPECT_EQ(in["warmup"], 1);
  EXPECT_EQ(in["seed"], 42);
  EXPECT_EQ(in["image_size"], 28);
  EXPECT_EQ(in["channels"], 3);  // encoded images decode to 3 unless --channels says otherwise
  EXPECT_EQ(in["data_order"], "global");
  // A truncated shard: verify names it and fails.
  const std::string shard = out + "/train-00001-of-00003.tar";
  const std::string bytes = read_file(shard);
  write_file_atomic(shard, bytes.substr(0, bytes.size() / 2 + 100));
  o = run_dlscale("data verify " + out);
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find(shard), std::string::npos) << o.err;
  dlscale::remove_tree(out);
  std::filesystem::remove(json);
}

TEST(DataTraining, StreamingOrderReadsEachWorkersOwnShards) {
  const std::string out = testing::temp_path("shards");
  ASSERT_EQ(run_dlscale("data pack idx:" + idx_dir() + " " + out + " --format tfrecord --shards 3").code, 0);
  // 3 shards of 12 training samples: worker 0 opens shards 0 and 2 (24
  // samples), worker 1 shard 1 (12); both run worker 1's 2 steps of 6.
  const TrainRun r = train("train --model lenet --threads 1 --steps 4 --warmup 1 --display-every 0 "
                           "--workers 2 --global-batch 12 --data-order streaming --shuffle-buffer 4 "
                           "--data tfrecord:" + out);
  EXPECT_EQ(r.record["inputs"]["data_order"], "streaming");
  const auto& data = r.record["results"]["data"];
  EXPECT_EQ(data["steps_per_epoch"], 2);
  EXPECT_EQ(data["samples"], 36);  // over both workers' parts
  EXPECT_EQ(data["shards"], 3);
  EXPECT_EQ(data["shards_opened"], 2);
  EXPECT_EQ(data["indexed_shards"], 2);
  EXPECT_EQ(r.record["results"]["comm"]["replicas_identical"], true);
  // 8 workers cannot each have their own of 3 shards.
  const auto o = run_dlscale("train --model lenet --threads 1 --steps 2 --warmup 1 --workers 8 --batch 1 "
                             "--data-order streaming --data tfrecord:" + out);
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("3 shard(s) cannot feed 8 workers"), std::string::npos) << o.err;
  dlscale::remove_tree(out);
}

/// An image folder of 24 PNGs (classes a, b) and one corrupt file in a.
std::string folder_with_a_corrupt_image() {
  const std::string dir = testing::temp_path("folder");
  for (int i = 0; i < 24; ++i) {
    const std::string cls = dir + (i % 2 ? "/b" : "/a");
    std::filesystem::create_directories(cls);
    testing::write_test_png(cls + "/" + std::to_string(i) + ".png", 28, i);
  }
  write_file_atomic(dir + "/a/bad.png", "\x89PNG\r\n\x1a\nthis is not a png");
  return dir;
}

TEST(DataTraining, CorruptImagesFailOrAreSkippedAndStagingIsReported) {
  const std::string dir = folder_with_a_corrupt_image();
  const std::string lenet =
      "train --model lenet --threads 1 --steps 4 --warmup 1 --batch 8 --display-every 0 --data folder:" + dir;
  const auto failed = run_dlscale(lenet);  // 25 images, 3 steps per epoch: every one is read
  EXPECT_EQ(failed.code, 2);
  EXPECT_NE(failed.err.find(dir + "/a/bad.png: corrupt PNG"), std::string::npos) << failed.err;
  const TrainRun skipped = train(lenet + " --skip-corrupt");
  EXPECT_GE(skipped.record["results"]["data"]["skipped_corrupt"].get<int64_t>(), 1);
  EXPECT_EQ(skipped.record["results"]["data"]["samples"], 25);
  const std::string stage = testing::temp_path("stage");
  const TrainRun staged = train(lenet + " --skip-corrupt --stage-dir " + stage);
  EXPECT_GT(staged.record["results"]["data"]["staged_bytes"].get<int64_t>(), 0);
  EXPECT_GT(staged.record["results"]["data"]["stage_s"].get<double>(), 0);
  EXPECT_TRUE(std::filesystem::exists(stage + "/b/1.png"));
  EXPECT_EQ(staged.record["results"]["data"]["location"], stage);
  dlscale::remove_tree(dir);
  dlscale::remove_tree(stage);
}

/// A tmpfs of `options` mounted on a new directory, unmounted at scope exit.
class ScratchMount {
 public:
  explicit ScratchMount(const std::string& options) : dir_(testing::temp_path("mnt")) {
    std::filesystem::create_directories(dir_);
    ok_ = ::geteuid() == 0 &&
          testing::run_shell("mount -t tmpfs -o " + options + " dlscale-test " + dir_).code == 0;
  }
  ~ScratchMount() {
    if (ok_) testing::run_shell("umount " + dir_);
    dlscale::remove_tree(dir_);
  }
  bool ok() const { return ok_; }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  bool ok_ = false;
};

// A full disk under --stage-dir is a storage failure, said as such (exit 6,
// "no space left"), not an "Input/output error" with exit 2; a stage
// directory that cannot be created says why.
TEST(DataTraining, StagingOntoAFullOrReadOnlyDiskSaysSo) {
  const ScratchMount full("size=8k");
  const ScratchMount read_only("ro,size=1m");
  DLSCALE_SKIP_UNLESS_ABLE(full.ok() && read_only.ok() ? "" : "needs root to mount a small tmpfs");
  const std::string data = testing::write_idx_dataset(36, 12, 28, false);  // 28 KiB of images
  const std::string run = "train --model lenet --threads 1 --steps 2 --warmup 1 --batch 4 "
                          "--display-every 0 --data idx:" + data + " --stage-dir ";
  const auto o = run_dlscale(run + full.dir() + "/stage");
  EXPECT_EQ(o.code, 6) << o.err;
  EXPECT_NE(o.err.find("no space left on the device"), std::string::npos) << o.err;
  EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
  const std::string err = fails(run + read_only.dir() + "/stage");
  EXPECT_EQ(err, "dlscale: error: --stage-dir " + read_only.dir() +
                     "/stage does not exist and cannot be created: Read-only file system\n");
  dlscale::remove_tree(data);
}

}  // namespace
}  // namespace dlscale
