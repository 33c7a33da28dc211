// Your own model end to end (docs/models.md): TorchScript modules exported
// at build time (tests/own_models.h) train through the real binary with real worker processes.
// N workers on shards of a global batch reach one worker's weights under
// every strategy, a batch-norm module matches the flat allreduce on the
// same workers, a checkpoint resumes bit for bit, and a module that fails
// is one line naming it.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "comm/tcp_store.h"
#include "core/files.h"
#include "data/data_util.h"
#include "own_models.h"
#include "process_util.h"
#include "weights_util.h"

namespace dlscale {
namespace {

using testing::closeness;
using testing::own_model;
using testing::run_dlscale;
using testing::temp_path;
using testing::train;
using testing::TrainRun;

// Global batch 12 divides by 2, 3 and 4 workers.
std::string small_cnn() {
  return "train --model " + own_model("small-cnn") +
         " --image-size 32 --threads 1 --steps 3 --warmup 1 --optimizer momentum --lr 0.05 "
         "--synthetic-batches 2 --display-every 0 --global-batch 12 --first-bucket-mb 0.01 "
         "--bucket-mb 0.1";
}

const std::vector<torch::Tensor>& small_cnn_reference() {
  static const std::vector<torch::Tensor> ref = train(small_cnn()).weights;
  return ref;
}

TEST(OwnModel, EveryStrategyMatchesOneWorker) {
  ASSERT_FALSE(small_cnn_reference().empty());
  for (const std::string strategy :
       {"allreduce --workers 2", "tree --workers 3", "hierarchical --workers 4 --ranks-per-node 2",
        "ps --ps-shards 2 --workers 2", "zero --zero-stage 1 --workers 2",
        "zero --zero-stage 2 --workers 2", "zero --zero-stage 3 --workers 3"}) {
    SCOPED_TRACE(strategy);
    const TrainRun r = train(small_cnn() + " --strategy " + strategy);
    EXPECT_LE(closeness(r.weights, small_cnn_reference(), 1e-5, 1e-7), 1.0);
    EXPECT_EQ(r.record["model"]["family"], "script");
    EXPECT_EQ(r.record["model"]["parameters"],
              testing::own_models().pytorch_parameters.at("small-cnn"));
  }
}

// fp16 on the wire: within fp16's precision of one worker (as the zoo's
// CompressedStrategies), and not equal to it (compression did something).
TEST(OwnModel, Fp16OnTheWireMatchesOneWorkerWithinItsPrecision) {
  ASSERT_FALSE(small_cnn_reference().empty());
  const TrainRun r = train(small_cnn() + " --workers 2 --compress fp16");
  EXPECT_LE(closeness(r.weights, small_cnn_reference(), 1.0 / 1024, 1e-4), 1.0);
  EXPECT_GT(closeness(r.weights, small_cnn_reference(), 1e-7, 0), 1.0);
  EXPECT_EQ(r.record["results"]["comm"]["wire_dtype"], "float16");
}

// Momentum SGD: Adam's first update is about lr x sign(g), so a gradient
// that is zero up to rounding (summed in another order over 2 workers) can
// flip a weight's step; that measures Adam, not the exchange.
TEST(OwnModel, ADeclaredTaskTrainsOnTwoWorkersAsOnOne) {
  const std::string run =
      "train --model " + own_model("encoder") + " --task-file " + DLSCALE_SOURCE_DIR +
      "/examples/own-model/encoder.task.yaml --threads 1 --steps 3 --warmup 1 --optimizer momentum "
      "--lr 0.05 --synthetic-batches 2 --display-every 0 --global-batch 8";
  const TrainRun one = train(run);
  const TrainRun two = train(run + " --workers 2");
  ASSERT_FALSE(one.weights.empty());
  EXPECT_LE(closeness(two.weights, one.weights, 1e-5, 1e-7), 1.0);
  EXPECT_EQ(two.record["model"]["task"], "sequence-classification");
  EXPECT_EQ(two.record["model"]["unit"], "sequences");
  EXPECT_GT(two.record["model"]["forward_flops_per_sample"].get<double>(), 0);
}

// The built-in tasks named in a task file train as the zoo's do: a
// translator (tokens, its vocabulary from its output) and a recommender
// (evaluated on HR@10 over candidate lists).
TEST(OwnModel, NamedTasksTrainOnTwoWorkersAsOnOne) {
  const std::string common =
      " --threads 1 --warmup 1 --optimizer momentum --lr 0.05 --synthetic-batches 2 "
      "--display-every 0 --global-batch 8";
  const std::string translator =
      "train --model " + own_model("translator") + " --task-file " +
      testing::own_file("translation.yaml", "task: translation\nseq_len: 12\n") + common;
  const std::string recommender =
      "train --model " + own_model("recommender") + " --task-file " +
      testing::own_file("recommendation.yaml", "task: recommendation\nusers: 600\nitems: 2000\n") +
      common;
  for (const std::string& run : {translator, recommender}) {
    const TrainRun one = train(run + " --steps 3");
    const TrainRun two = train(run + " --steps 3 --workers 2");
    ASSERT_FALSE(one.weights.empty()) << run;
    EXPECT_LE(closeness(two.weights, one.weights, 1e-5, 1e-7), 1.0) << run;
  }
  const TrainRun t = train(translator + " --steps 3 --workers 2");
  EXPECT_EQ(t.record["model"]["task"], "translation");
  EXPECT_EQ(t.record["model"]["unit"], "tokens");
  // Batches of their own lengths (6 to 12 tokens) pass the first batch's check.
  const TrainRun lengths = train(translator + " --steps 3 --min-seq-len 6");
  EXPECT_FALSE(lengths.weights.empty());
  const TrainRun r = train(recommender + " --epochs 1 --synthetic-test 16 --eval-every 1");
  const nlohmann::json& c = r.record["results"]["convergence"];
  ASSERT_TRUE(c.is_object()) << r.record.dump();
  EXPECT_EQ(c["metric"], "hr10");
  EXPECT_EQ(c["evals"].back()["samples"], 16);
}

// A declared task reads real data whose tensors fit it, to a target on its
// own metric; data that does not fit is named before the module sees it.
TEST(OwnModel, ADeclaredTaskReadsRealDataToItsTarget) {
  const std::string data = testing::write_idx_dataset(36, 17, 28, false);
  const std::string declared =
      "inputs: [{name: image, shape: [1, 28, 28]}]\n"
      "target: {name: label, dtype: int64, high: 10}\nloss: cross-entropy\nmetrics: [top1]\n";
  const std::string run = "train --model " + own_model("mnist-mlp") +
                          " --threads 1 --warmup 1 --global-batch 12 --display-every 0 --lr 0.05 "
                          "--data idx:" +
                          data + " --task-file ";
  const TrainRun missed =
      train(run + testing::own_file("mnist.yaml", declared) +
            " --workers 2 --epochs 2 --target-accuracy 1.0 --eval-every-steps 2");
  const nlohmann::json& m = missed.record["results"]["convergence"];
  ASSERT_TRUE(m.is_object()) << missed.record.dump();
  EXPECT_EQ(m["metric"], "top1");
  EXPECT_EQ(m["status"], "aborted");
  ASSERT_EQ(m["evals"].size(), 3u);  // after steps 2, 4 and 6
  EXPECT_EQ(m["evals"][0]["samples"], 17);
  const TrainRun hit = train(run + testing::own_file("mnist.yaml", declared) +
                             " --epochs 3 --target-accuracy 0.0001");
  EXPECT_EQ(hit.record["results"]["convergence"]["status"], "success");
  EXPECT_EQ(hit.record["results"]["convergence"]["steps_done"], 3);
  // Declared flat (784 floats a sample), which the module's forward would
  // take but an image dataset cannot give: named before training, exit 2.
  std::string flat = declared;
  flat.replace(flat.find("[1, 28, 28]"), 11, "[784]");
  const auto refused =
      run_dlscale(run + testing::own_file("flat.yaml", flat) + " --steps 2 --workers 2");
  EXPECT_EQ(refused.code, 2) << refused.err;
  EXPECT_NE(
      refused.err.find("data 'idx:" + data + "' holds images; model '" + own_model("mnist-mlp") +
                       "' (declared) reads 784: declare 'image' as C x S x S float32"),
      std::string::npos)
      << refused.err;
  dlscale::remove_tree(data);
}

// Batch norm's statistics are each worker's own: strategies match the flat
// allreduce on the same workers (as the zoo's batch-norm models do).
TEST(OwnModel, TorchvisionsResnet18MatchesFlatAllreduceAndResumes) {
  const std::string base =
      "train --model " + own_model("resnet18-10") +
      " --image-size 16 --threads 1 --optimizer momentum --lr 0.05 --synthetic-batches 2 "
      "--display-every 0 --global-batch 8 --workers 2 --warmup 1 --steps ";
  const TrainRun flat = train(base + "4 --strategy allreduce --bucket-mb 0");
  const TrainRun bucketed = train(base + "4 --strategy allreduce");
  ASSERT_FALSE(flat.weights.empty());
  EXPECT_LE(closeness(bucketed.weights, flat.weights, 1e-5, 1e-7), 1.0);
  const std::string ckpt = temp_path("own.ckpt");
  const TrainRun first = train(base + "2 --checkpoint " + ckpt + " --checkpoint-every 2");
  const TrainRun resumed = train(base + "4 --resume " + ckpt);
  ASSERT_EQ(resumed.weights.size(), bucketed.weights.size());
  for (size_t i = 0; i < resumed.weights.size(); ++i)
    EXPECT_TRUE(torch::equal(resumed.weights[i], bucketed.weights[i])) << i;
  std::filesystem::remove(ckpt);
}

TEST(OwnModel, AModuleThatFailsIsOneLineWithExitCode2) {
  const auto raises = run_dlscale("train --model " + own_model("raises") +
                                  " --image-size 32 --steps 2 --warmup 1 --workers 2");
  EXPECT_EQ(raises.code, 2) << raises.err;
  EXPECT_NE(raises.err.find("builtins.ValueError: this module refuses every input"),
            std::string::npos)
      << raises.err;
  const auto junk_path = testing::own_file("junk.pt", "junk");
  const auto junk = run_dlscale("train --model " + junk_path + " --steps 2 --warmup 1");
  EXPECT_EQ(junk.code, 2) << junk.err;
  EXPECT_NE(junk.err.find("is not a TorchScript module that LibTorch"), std::string::npos)
      << junk.err;
  const auto models =
      run_dlscale("models " + own_model("resnet18-10") + " --image-size 32 --tensors --json");
  ASSERT_EQ(models.code, 0) << models.err;
  const nlohmann::json listed = nlohmann::json::parse(models.out);
  const int64_t parameters = testing::own_models().pytorch_parameters.at("resnet18-10");
  EXPECT_EQ(listed[0]["parameters"], parameters);
  EXPECT_EQ(listed[0]["num_classes"], 10);
  ASSERT_EQ(listed[0]["tensors"].size(),
            62u);  // torchvision's resnet18: 20 convs, 20 batch norms x2, fc x2
  EXPECT_EQ(listed[0]["tensors"][0]["name"], "conv1.weight");
  EXPECT_EQ(listed[0]["tensors"][0]["shape"], (std::vector<int64_t>{64, 3, 7, 7}));
  int64_t bytes = 0;
  for (const auto& t : listed[0]["tensors"]) bytes += t["bytes"].get<int64_t>();
  EXPECT_EQ(bytes, 4 * parameters);
}

// Hand-started nodes see a module by its path: two nodes whose files at
// the same path differ (here small-cnn and resnet18-10, both 10-class
// image classifiers) are named at start, by the files' digests.
TEST(OwnModel, NodesWhoseModulesDifferAreNamed) {
  const std::string dir = temp_path("own-nodes");
  for (const std::string node : {"a", "b"}) std::filesystem::create_directories(dir + "/" + node);
  std::filesystem::copy_file(own_model("small-cnn"), dir + "/a/m.pt");
  std::filesystem::copy_file(own_model("resnet18-10"), dir + "/b/m.pt");
  uint16_t port = 0;
  {
    comm::TcpStoreServer probe("127.0.0.1", 0);  // a free port, released for the job
    port = probe.port();
  }
  const std::string node =
      std::string(DLSCALE_BINARY) +
      " train --model m.pt --image-size 32 --batch 4 --steps 3 --warmup 1 --threads 1 "
      "--display-every 0 --timeout 30 --workers 1 --nnodes 2 --master-addr 127.0.0.1 "
      "--host-addr 127.0.0.1 --master-port " +
      std::to_string(port);
  const auto o = testing::run_shell("(cd " + dir + "/a && " + node +
                                    " --node-rank 0 2>&1) & other=$!; cd " + dir + "/b && " + node +
                                    " --node-rank 1 2>&1; rc=$?; wait $other; echo codes $rc $?");
  EXPECT_NE(o.out.find("codes 2 2"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("workers disagree on the run config: rank 1 has model_file_digest="),
            std::string::npos)
      << o.out;
  dlscale::remove_tree(dir);
}

// The worked example (examples/own-model/run.sh): export with PyTorch,
// list, sweep over 1 and 2 workers, report, in a directory of its own.
TEST(OwnModel, TheWorkedExampleExportsSweepsAndReports) {
  const std::string dir = temp_path("own-example");
  std::filesystem::create_directories(dir);
  std::filesystem::create_directory_symlink(std::string(DLSCALE_SOURCE_DIR) + "/examples",
                                            dir + "/examples");
  const auto o = testing::run_shell("cd " + dir + " && DLSCALE=" + DLSCALE_BINARY +
                                    " bash examples/own-model/run.sh results.db");
  ASSERT_EQ(o.code, 0) << o.out << o.err;
  for (const std::string model :
       {"own-models/small-cnn.pt", "own-models/resnet18-10.pt", "own-models/encoder.pt"}) {
    EXPECT_NE(o.out.find(model), std::string::npos) << model << "\n" << o.out;
  }
  EXPECT_NE((o.out + o.err).find("6 completed, 0 failed"), std::string::npos) << o.out << o.err;
  dlscale::remove_tree(dir);
}

}  // namespace
}  // namespace dlscale
