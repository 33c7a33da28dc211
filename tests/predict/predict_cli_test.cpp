// `dlscale predict` end to end: calibrated on a real 1-worker record of
// this machine, on the shipped systems, and its one-line errors.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/files.h"
#include "process_util.h"

namespace dlscale::testing {
namespace {

/// A 1-worker lenet record with its backward profile (made once).
const std::string& lenet_record() {
  static const std::string path = [] {
    const std::string json = temp_path("lenet.json");
    const Outcome o = run_dlscale("train -m lenet --steps 6 --warmup 2 --display-every 0 --trace " +
                                  temp_path("trace.json") + " --json " + json);
    EXPECT_EQ(o.code, 0) << o.err;
    return json;
  }();
  return path;
}

/// lenet_record() as 2 independent workers beside each other that took
/// `factor` times as long to compute (a --calibrate-busy record).
std::string busy_lenet_record(double factor) {
  nlohmann::json busy = nlohmann::json::parse(read_file(lenet_record()));
  busy["inputs"]["world_size"] = 2;
  busy["inputs"]["strategy"] = "independent";
  for (const char* phase : {"forward", "backward", "optimizer"}) {
    busy["results"]["breakdown_ms"][phase] =
        factor * busy["results"]["breakdown_ms"][phase].get<double>();
  }
  const std::string path = temp_path(fmt::format("lenet-busy-{:g}.json", factor));
  write_file_atomic(path, busy.dump());
  return path;
}

TEST(PredictCli, ATracedRecordCarriesWhenEachGradientIsReady) {
  const nlohmann::json r = nlohmann::json::parse(read_file(lenet_record()));
  const nlohmann::json& p = r["results"]["backward_profile"];
  ASSERT_TRUE(p.is_object()) << r["results"].dump();
  EXPECT_EQ(p["steps"], 4);
  // lenet: 4 layers of weight and bias, 3,274,634 fp32 parameters.
  ASSERT_EQ(p["tensors"].size(), 8u);
  int64_t bytes = 0;
  for (const auto& t : p["tensors"]) {
    bytes += t["bytes"].get<int64_t>();
    EXPECT_GE(t["ready_ms"].get<double>(), 0);
    EXPECT_LE(t["ready_ms"].get<double>(), p["backward_ms"].get<double>() * 1.5);
  }
  EXPECT_EQ(bytes, 4 * 3274634);
  // Backward reaches the last layer's weight before the first layer's.
  EXPECT_LT(p["tensors"][6]["ready_ms"].get<double>(), p["tensors"][0]["ready_ms"].get<double>());
}

TEST(PredictCli, PredictsFromTheRecordAndWritesJsonAndHtml) {
  const std::string json = temp_path("predict.json"), html = temp_path("predict.html");
  const Outcome o = run_dlscale("predict --calibrate " + lenet_record() +
                                " --link-gbps 1 --latency-us 50 --workers 2-8 -s allreduce,ps:2,tree+fp16 --json " +
                                json + " --html " + html);
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("strategy ps:2"), std::string::npos) << o.out;
  const nlohmann::json p = nlohmann::json::parse(read_file(json));
  EXPECT_EQ(p["schema"], "dlscale.predict/1");
  ASSERT_EQ(p["strategies"].size(), 3u);
  const nlohmann::json r = nlohmann::json::parse(read_file(lenet_record()));
  const auto& b = r["results"]["breakdown_ms"];
  const double t1 = b["data"].get<double>() + b["forward"].get<double>() + b["backward"].get<double>() +
                    b["optimizer"].get<double>();
  EXPECT_NEAR(p["t1_ms"].get<double>(), t1, 1e-9);
  for (const auto& s : p["strategies"]) {
    ASSERT_EQ(s["points"].size(), 3u);  // 2, 4, 8
    EXPECT_EQ(s["points"][2]["workers"], 8);
    // More workers never raise the weak-scaling efficiency here.
    EXPECT_LE(s["points"][2]["efficiency_pct"].get<double>(), s["points"][0]["efficiency_pct"].get<double>() + 1e-9);
    EXPECT_LT(s["points"][0]["efficiency_pct"].get<double>(), 100);
  }
  const std::string page = read_file(html);
  EXPECT_NE(page.find("<svg"), std::string::npos);
  EXPECT_NE(page.find("tree+fp16"), std::string::npos);
}

TEST(PredictCli, SharedCoresPayForMovingTheBytes) {
  const auto rate = [](const std::string& extra) {
    const std::string json = temp_path("shared.json");
    const Outcome o = run_dlscale("predict --calibrate " + lenet_record() + " --link-gbps 1 --workers 2 -s allreduce "
                                  "--shared-cores 2 --json " + json + " " + extra);
    EXPECT_EQ(o.code, 0) << o.err;
    return nlohmann::json::parse(read_file(json))["strategies"][0]["points"][0]["samples_per_sec"].get<double>();
  };
  // lenet's 13 MB a step at 0.01 GB/s of copying: far slower than free copies.
  EXPECT_LT(rate("--copy-gbyte-s 0.01"), 0.9 * rate(""));
  EXPECT_NE(fails("predict --calibrate " + lenet_record() + " --link-gbps 1 --copy-gbyte-s -1").find("--copy-gbyte-s"),
            std::string::npos);
}

// --calibrate-busy: where 2 workers share a node's cores they compute at the
// busy record's times; alone on a node (or alone), at the 1-worker record's.
TEST(PredictCli, ABusyRecordComputesWhereItsWorkersShareANode) {
  const std::string busy = busy_lenet_record(3), json = temp_path("busy-predict.json");
  const auto compute_ms = [&](int per_node) {
    const Outcome o =
        run_dlscale("predict --calibrate " + lenet_record() + " --calibrate-busy " + busy +
                    " --link-gbps 8 -n 1,2,4 -s allreduce --workers-per-node " +
                    std::to_string(per_node) + " --json " + json);
    EXPECT_EQ(o.code, 0) << o.err;
    EXPECT_NE(
        o.out.find("where 2 or more workers share cores: compute from measured with every core "
                   "busy: " +
                   busy),
        std::string::npos)
        << o.out;
    const nlohmann::json p = nlohmann::json::parse(read_file(json));
    EXPECT_EQ(p["workload"]["busy"]["side_by_side"], 2);
    std::vector<double> ms;
    for (const auto& point : p["strategies"][0]["points"])
      ms.push_back(point["compute_ms"].get<double>());
    return ms;
  };
  const nlohmann::json record = nlohmann::json::parse(read_file(lenet_record()));
  const nlohmann::json& b = record["results"]["breakdown_ms"];
  const double data = b["data"].get<double>(), phases = b["forward"].get<double>() +
                                                        b["backward"].get<double>() +
                                                        b["optimizer"].get<double>();
  const std::vector<double> shared = compute_ms(2), alone = compute_ms(1);
  ASSERT_EQ(shared.size(), 3u);
  ASSERT_EQ(alone.size(), 3u);
  EXPECT_NEAR(shared[0], data + phases, 1e-6);  // N = 1: alone
  EXPECT_NEAR(shared[1], data + 3 * phases, 1e-6);
  EXPECT_NEAR(shared[2], data + 3 * phases, 1e-6);               // 2 nodes of 2
  for (double ms : alone) EXPECT_NEAR(ms, data + phases, 1e-6);  // one worker a node
  EXPECT_NE(fails("predict --model lenet --device-rate 100 --batch 8 --calibrate-busy " + busy)
                .find("--calibrate-busy needs --calibrate"),
            std::string::npos);
  EXPECT_NE(fails("predict --calibrate " + lenet_record() + " --link-gbps 8 --calibrate-busy " +
                  lenet_record())
                .find("--strategy independent"),
            std::string::npos);
  nlohmann::json other = nlohmann::json::parse(read_file(busy));
  other["model"]["name"] = "resnet18";
  const std::string other_path = temp_path("resnet18-busy.json");
  write_file_atomic(other_path, other.dump());
  EXPECT_NE(fails("predict --calibrate " + lenet_record() +
                  " --link-gbps 8 -n 2 --calibrate-busy " + other_path)
                .find("the busy calibration measured resnet18"),
            std::string::npos);
}

// `dlscale` predicts without LibTorch: alone in a folder (no dlscale-torch
// beside it) it predicts from a record, and hands over only a zoo model's
// FLOP profile, which then fails naming the missing executable.
TEST(PredictCli, PredictsWithoutLibTorchUnlessItProfilesAZooModel) {
  const std::string dir = temp_path("front");
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(DLSCALE_BINARY, dir + "/dlscale");
  const std::string front = dir + "/dlscale";
  Outcome o = run_shell(front + " predict --calibrate " + lenet_record() + " --link-gbps 1 -n 1,2");
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("allreduce"), std::string::npos) << o.out;
  o = run_shell(front + " predict --system horovod-roce --model resnet101 --workers 4-8:x2");
  EXPECT_NE(o.code, 0);
  EXPECT_NE(o.err.find("'predict' needs " + dir + "/dlscale-torch, which could not be started"), std::string::npos)
      << o.err;
  dlscale::remove_tree(dir);
}

TEST(PredictCli, ShippedSystemsPredictAndValidate) {
  Outcome o = run_dlscale("predict --system horovod-roce --model resnet101 --workers 4-512:x2");
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("strategy allreduce"), std::string::npos);
  EXPECT_NE(o.out.find("512"), std::string::npos);
  o = run_dlscale("predict --system dgx1-p100 --validate");
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("median |diff|"), std::string::npos) << o.out;
}

/// A 2-worker run that reached top-1 0.9 after 1.5 epochs (1,500 steps) at
/// global batch 32 with a gradient noise scale of 64, as train writes it.
std::string reached_record(const std::string& b_simple = "64.0",
                           const std::string& status = "success") {
  const std::string path = temp_path("reached-" + b_simple + status + ".json");
  write_file_atomic(path, R"({"kind": "train", "status": "ok", "model": {"name": "lenet"},
      "inputs": {"batch": 16, "world_size": 2, "accumulate": 1},
      "results": {"convergence": {"target": 0.9, "status": ")" +
                              status + R"(", "metric": "top1",
                                  "epochs_to_target": 1.5, "steps_done": 1500},
                  "noise": {"b_simple": )" +
                              b_simple + "}}}");
  return path;
}

TEST(PredictCli, TimeToAccuracyAtEachNFromARunThatReachedItsTarget) {
  const std::string json = temp_path("tta.json"), html = temp_path("tta.html");
  const Outcome o =
      run_dlscale("predict --calibrate " + lenet_record() + " --tta " + reached_record() +
                  " --link-gbps 10 -n 1-16 -s allreduce,ps:1 --max-global-batch 256 --json " +
                  json + " --html " + html);
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("time to accuracy, strategy ps:1"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("fastest: N = "), std::string::npos) << o.out;
  const nlohmann::json p = nlohmann::json::parse(read_file(json));
  ASSERT_EQ(p["tta"]["strategies"].size(), 2u);
  EXPECT_EQ(p["tta"]["run"]["global_batch"], 32);
  EXPECT_EQ(p["tta"]["model"]["b_crit"], 64);
  const nlohmann::json& points = p["tta"]["strategies"][0]["points"];
  ASSERT_EQ(points.size(), 5u);                                // 1, 2, 4, 8, 16
  EXPECT_EQ(points[4]["global_batch"], 256);                   // 16 x 32 capped at 256
  EXPECT_NEAR(points[0]["epochs"].get<double>(), 1.5, 1e-12);  // the record's own batch
  EXPECT_NE(read_file(html).find("Predicted time to target"), std::string::npos);
  // Each refused in one line naming it, exit 2.
  const auto refused = [&](const std::string& args, const std::string& what) {
    const Outcome bad =
        run_dlscale("predict --calibrate " + lenet_record() + " --link-gbps 10 " + args);
    EXPECT_EQ(bad.code, 2) << args;
    EXPECT_NE(bad.err.find(what), std::string::npos) << bad.err;
  };
  refused("--tta " + lenet_record(), "the run had no target");
  refused("--tta " + reached_record("64.0", "aborted"), "did not reach its target");
  refused("--tta " + reached_record("null"), "noise scale is undefined");
  refused("--tta " + reached_record("-2.5"), "noise scale is -2.5, not positive");
  refused("--max-global-batch 64", "--max-global-batch caps the batch of --tta");
  refused("--tta " + reached_record() + " --global-batch 64", "--tta predicts weak scaling");
  refused("--tta-noise simple", "--tta-noise chooses the noise scale of --tta");
  refused("--tta " + reached_record() + " --tta-noise adam", "--tta-noise adam needs Adam's");
  refused("--tta " + reached_record() + " --tta-noise hessian", "--tta-noise");
}

// maskrcnn's FLOP profile follows --rois and --classes (issue 46): fewer
// RoIs put less of the backward pass in the box and mask heads, so its
// gradients are ready at other times; fewer classes, fewer gradient bytes.
TEST(PredictCli, MaskRcnnsProfileFollowsItsRoisAndClasses) {
  const auto predict = [](const std::string& flags) {
    const std::string json = temp_path("maskrcnn.json");
    const Outcome o = run_dlscale(
        "predict --model maskrcnn --image-size 64 --device-rate 1 --batch 1 "
        "--link-gbps 1 -n 1,2 -s allreduce --json " +
        json + " " + flags);
    EXPECT_EQ(o.code, 0) << o.err;
    const nlohmann::json j = nlohmann::json::parse(read_file(json));
    std::filesystem::remove(json);
    return j;
  };
  const nlohmann::json few = predict("--classes 5 --rois 16"),
                       many = predict("--classes 5 --rois 64"), reference = predict("--rois 64");
  EXPECT_EQ(few["workload"]["gradient_bytes"], many["workload"]["gradient_bytes"]);
  EXPECT_LT(many["workload"]["gradient_bytes"].get<double>(),
            reference["workload"]["gradient_bytes"].get<double>());
  const auto step_at_two = [](const nlohmann::json& j) {
    return j["strategies"][0]["points"][1]["step_ms"];
  };
  ASSERT_EQ(few["strategies"][0]["points"][1]["workers"], 2);
  EXPECT_NE(step_at_two(few), step_at_two(many));
  EXPECT_NE(fails("predict --model maskrcnn --rois -3 --device-rate 1 --batch 1 --link-gbps 1")
                .find("--rois must be >= 1 (got -3)"),
            std::string::npos);
  EXPECT_NE(fails("predict --model maskrcnn --classes 1 --device-rate 1 --batch 1 --link-gbps 1")
                .find("--classes must be >= 2 for model 'maskrcnn'"),
            std::string::npos);
}

TEST(PredictCli, BadInputGetsOneLineNamingIt) {
  const std::string rec = lenet_record();
  EXPECT_NE(fails("predict --calibrate " + rec + " --link-gbps 1 --workers 0").find("must be >= 1"), std::string::npos);
  EXPECT_NE(fails("predict --calibrate " + rec + " --link-gbps 1 -s ps:4 --workers 2").find("4 colocated shards"),
            std::string::npos);
  EXPECT_NE(fails("predict --calibrate " + rec + " --link-gbps 1 -s hierarchical").find("hierarchical needs"),
            std::string::npos);
  EXPECT_NE(fails("predict --calibrate " + rec + " --system no-such").find("unknown system 'no-such'"),
            std::string::npos);
  EXPECT_NE(fails("predict --calibrate " + rec).find("no network"), std::string::npos);
  EXPECT_NE(fails("predict --link-gbps 1").find("no compute"), std::string::npos);
  EXPECT_NE(fails("predict --model resnet50 --device-rate 100 --link-gbps 1").find("--batch"), std::string::npos);
  EXPECT_NE(fails("predict --calibrate /nonexistent.json --link-gbps 1").find("/nonexistent.json"), std::string::npos);
  const std::string bad = temp_path("bad.json");
  write_file_atomic(bad, "{\"kind\": \"train\", \"status\": \"ok\", \"inputs\": {\"world_size\": 1}}");
  EXPECT_NE(fails("predict --calibrate " + bad + " --link-gbps 1").find("inputs.batch"), std::string::npos);
  EXPECT_NE(fails("predict --calibrate " + rec + " --link-gbps 1 -s warp").find("unknown strategy 'warp'"),
            std::string::npos);
  // A bad -s is named first, whatever else is missing (issue 42).
  EXPECT_NE(fails("predict -s allreduce+fp16+bf16").find("one compression at most"), std::string::npos);
  EXPECT_NE(fails("predict --link-gbps 1 -s ,").find("--strategy"), std::string::npos);
  EXPECT_NE(fails("predict --calibrate " + rec + " --link-gbps 1 --latency-us 1e308").find(
                "--latency-us must be in [0, 1e+06] (got 1e+308)"),
            std::string::npos);
  // One worker per node: the default list has no hierarchical to fail on.
  const auto o = dlscale::testing::run_dlscale("predict --calibrate " + rec + " --link-gbps 1 -n 1,2");
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(o.out.find("hierarchical"), std::string::npos) << o.out;
}

TEST(PredictCli, AFabricSlowsWhatCrossesItsUplinksAndIsRefusedWhereItIsNotModelled) {
  const std::string rec = lenet_record(), with = temp_path("fabric.json"),
                    without = temp_path("nofabric.json");
  const std::string base =
      "predict --calibrate " + rec + " --link-gbps 1 -n 4 -s allreduce,ps:4+partition:1 --json ";
  ASSERT_EQ(run_dlscale(base + without).code, 0);
  const Outcome o = run_dlscale(base + with + " --fabric-nodes 2 --fabric-gbps 1");
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("a fabric of 2 node(s) a group, each group's uplink 1 Gbit/s"),
            std::string::npos)
      << o.out;
  const nlohmann::json f = nlohmann::json::parse(read_file(with)),
                       n = nlohmann::json::parse(read_file(without));
  EXPECT_EQ(f["network"]["fabric"]["nodes_per_group"], 2);
  EXPECT_TRUE(n["network"]["fabric"].is_null());
  // Uplinks as fast as the links: the ring is unchanged, the PS (each rack
  // sending S where a link carries 3/4 S, the tensors split evenly) is slower.
  const auto step = [](const nlohmann::json& p, int s) {
    return p["strategies"][s]["points"][0]["step_ms"].get<double>();
  };
  EXPECT_DOUBLE_EQ(step(f, 0), step(n, 0));
  EXPECT_GT(step(f, 1), step(n, 1));
  EXPECT_NE(fails("predict --calibrate " + rec +
                  " --link-gbps 1 -n 4 -s tree --fabric-nodes 2 --fabric-gbps 1")
                .find("strategy 'tree': with a shared fabric only rings"),
            std::string::npos);
  EXPECT_NE(
      fails("predict --calibrate " + rec + " --link-gbps 1 --fabric-nodes 2").find("--fabric-gbps"),
      std::string::npos);
}

TEST(PredictCli, ReportTypePredictPutsEveryRunNextToItsPrediction) {
  const std::string db = temp_path("predict.db"), yaml = temp_path("predict.yaml");
  write_file_atomic(yaml, R"(name: pc
parameters: {model: lenet, image-size: 28, batch: 32, steps: 6, warmup: 2, threads: 1, display-every: 0, timeout: 300}
variables:
  workers: [1, 2]
  strategy: [allreduce, ps]
)");
  Outcome o = run_dlscale("sweep " + yaml + " --db " + db + " --progress plain");
  ASSERT_EQ(o.code, 0) << o.err;
  // Local workers share one host: the link given is theirs.
  o = run_dlscale("report --db " + db + " --type predict --calibrate " + lenet_record() +
                  " --link-gbps 8 --latency-us 100 --format json");
  ASSERT_EQ(o.code, 0) << o.err;
  const nlohmann::json r = nlohmann::json::parse(o.out);
  EXPECT_EQ(r["type"], "predict");
  // The two runs of 2 workers (1-worker runs have nothing to predict).
  ASSERT_EQ(r["rows"].size(), 2u) << o.out;
  for (const auto& row : r["rows"]) {
    EXPECT_EQ(row["workers"], 2);
    EXPECT_EQ(row["link"], "one host");
    const double predicted = row["predicted_samples_per_sec"].get<double>();
    const double measured = row["measured_samples_per_sec"].get<double>();
    EXPECT_GT(predicted, 0);
    EXPECT_NEAR(row["error_pct"].get<double>(), 100 * (predicted - measured) / measured, 1e-9);
  }
  EXPECT_NE(fails("report --db " + db + " --type predict --link-gbps 1").find("--calibrate"), std::string::npos);
  // --calibrate-busy: 2 independent workers computing 3x as long make the
  // 2-worker runs' predictions slower; a 1-worker record is refused.
  const std::string busy_path = busy_lenet_record(3);
  const std::string with_busy = "report --db " + db + " --type predict --calibrate " +
                                lenet_record() +
                                " --link-gbps 8 --latency-us 100 --format json --calibrate-busy ";
  o = run_dlscale(with_busy + busy_path);
  ASSERT_EQ(o.code, 0) << o.err;
  const nlohmann::json b = nlohmann::json::parse(o.out);
  ASSERT_EQ(b["rows"].size(), 2u) << o.out;
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_LT(b["rows"][i]["predicted_samples_per_sec"].get<double>(),
              r["rows"][i]["predicted_samples_per_sec"].get<double>());
  }
  EXPECT_NE(o.out.find("measured with every core busy"), std::string::npos) << o.out;
  EXPECT_NE(fails(with_busy + lenet_record()).find("--strategy independent"), std::string::npos);
  EXPECT_NE(fails("report --db " + db + " --type weak --calibrate-busy " + busy_path)
                .find("--calibrate-busy goes with --type predict"),
            std::string::npos);
  // --tta: a record or a stored run that reached its target (unit tests:
  // TtaReport.*); none of these runs trained to one.
  const std::string tta =
      "report --db " + db + " --type predict --calibrate " + lenet_record() + " --link-gbps 8";
  EXPECT_NE(fails(tta + " --tta " + reached_record())
                .find("no completed run in the selection trained lenet to top1 >= 0.9"),
            std::string::npos);
  EXPECT_NE(fails(tta + " --tta 1").find("--tta 1: the run had no target"), std::string::npos);
  EXPECT_NE(fails(tta + " --tta 99").find("--tta 99: no such file, and no run 99 in " + db),
            std::string::npos);
  EXPECT_NE(fails("report --db " + db + " --tta 1").find("--tta goes with --type predict"),
            std::string::npos);
}

}  // namespace
}  // namespace dlscale::testing
