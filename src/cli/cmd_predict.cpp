// dlscale predict: what N workers would do (flags -> workload, network,
// strategies -> the scaling model, docs/predict.md).
#include <iostream>
#include <memory>
#include <optional>

#include "cli/commands.h"
#include "cli/torch_commands.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/files.h"
#include "core/text.h"
#include "predict/predict_output.h"
#include "predict/system_file.h"
#include "predict/tta.h"

namespace dlscale::cli {
namespace {

constexpr const char* kPredictAbout =
    "Predict step time, throughput, speedup and scaling efficiency at N workers for each strategy, from one "
    "worker's measured (or published) compute and the network's alpha-beta figures; names each point's "
    "bottleneck (docs/predict.md). --validate checks a system's published figures.";

struct PredictFlags {
  std::string model;
  models::ModelOptions model_options;
  std::string calibrate;       // a 1-worker record with a backward profile
  std::string calibrate_busy;  // the same model measured with every core busy
  double device_rate = 0;      // a published samples/s of one device
  std::string backward_from;   // a record whose backward profile splits a published figure
  std::string system;
  predict::NetworkFlags network;
  std::vector<std::string> strategies;
  std::string workers = "1-64";
  long long batch = 0, global_batch = 0;
  predict::PredictOptions options;
  double copy_gbyte_s = 0;
  bool validate = false;
  std::string tta;              // a run that reached its target, with --noise-scale
  std::string tta_noise = "auto";  // --tta: which noise scale (predict/tta.h)
  double max_global_batch = 0;  // --tta: the global batch stops growing here
  bool cores_given = false, buckets_given = false, first_bucket_given = false,
       threads_given = false, shared_given = false, copy_given = false, tta_noise_given = false;
  std::string json, html;
};

/// The backward profile of a published figure: measured when a record is
/// given, else the FLOPs of each layer of the zoo's model, which need
/// LibTorch (zoo_backward_profile: `dlscale` hands the command over).
predict::BackwardProfile profile_for(const PredictFlags& f, const std::string& model, double& flops,
                                     const std::vector<std::string>& argv) {
  if (!f.backward_from.empty()) {
    return predict::backward_profile_from_record(predict::read_json_file(f.backward_from), f.backward_from);
  }
  return zoo_backward_profile(model, f.model_options, flops, argv);
}

predict::Workload make_workload(const PredictFlags& f, const predict::SystemSpec* system,
                                const std::vector<std::string>& argv) {
  if (!f.calibrate.empty()) {
    DLSCALE_CHECK(f.device_rate == 0, "--calibrate and --device-rate both give the compute; give one");
    predict::Workload w = predict::calibrate_from_record(predict::read_json_file(f.calibrate), f.calibrate);
    DLSCALE_CHECK(f.model.empty() || f.model == w.model, "--model {} but {} measured {}", f.model, f.calibrate, w.model);
    return w;
  }
  DLSCALE_CHECK(!f.model.empty(), "no compute to predict from: give --calibrate RECORD, or --model with "
                "--device-rate (or a --system that lists the model's rate)");
  // --device-rate is a figure at --batch; a system's rates are at its own batch.
  double rate = f.device_rate;
  long long batch = f.batch;
  if (rate == 0 && system != nullptr && system->rate(f.model) > 0) {
    rate = system->rate(f.model);
    batch = system->batch;
  }
  DLSCALE_CHECK(rate > 0, "no samples/s for model '{}': give --device-rate (one device's published figure){}",
                f.model, system != nullptr ? " or add it to the system's 'rates'" : "");
  DLSCALE_CHECK(batch > 0, "--device-rate needs the --batch it was measured at");
  double flops = 0;
  predict::Workload w = predict::calibrate_from_rate(f.model, batch, rate, profile_for(f, f.model, flops, argv));
  w.flops_per_sample = flops;
  return w;
}

/// Predicts, prints, and writes the record and the page; with --tta, the
/// time to target at each N as well.
void predict_and_write(const PredictFlags& f, const predict::Workload& w, const predict::Network& n,
                       const std::vector<predict::StrategySpec>& specs,
                       const predict::PredictOptions& o,
                       const std::optional<predict::TtaRun>& tta_run,
                       const std::vector<std::string>& argv) {
  const double start = now_seconds();
  const predict::Prediction p = predict::predict(w, n, specs, o);
  std::optional<predict::TtaPrediction> tta;
  if (tta_run) tta = predict::predict_tta(w, n, specs, o, *tta_run, f.max_global_batch);
  const double took = now_seconds() - start;
  predict::print_prediction(p, std::cout);
  if (tta) {
    std::cout << "\n";
    predict::print_tta(*tta, std::cout);
  }
  std::cerr << fmt::format("predicted {} point(s) in {:.3f} s\n", specs.size() * o.workers.size(),
                           took);
  // Indented for people, unless it is too long to read anyway.
  const int indent = specs.size() * o.workers.size() <= 10000 ? 2 : -1;
  if (!f.json.empty()) {
    nlohmann::json j = predict::prediction_json(p, argv);
    if (tta) j["tta"] = predict::tta_json(*tta);
    write_file_atomic(f.json, dump_json(j, indent) + "\n");
  }
  if (!f.html.empty()) {
    write_file_atomic(f.html,
                      tta ? predict::tta_html(*tta, o.workers, predict::prediction_header(p))
                          : predict::prediction_html(p));
  }
}

void run(const PredictFlags& f, const std::vector<std::string>& argv) {
  check_output_paths({{"--json", f.json}, {"--html", f.html}});
  std::unique_ptr<predict::SystemSpec> system;
  if (!f.system.empty()) system = std::make_unique<predict::SystemSpec>(predict::load_system(f.system, DLSCALE_SYSTEMS_DIR));
  if (f.validate) {
    DLSCALE_CHECK(system != nullptr, "--validate checks a system's published figures: give --system");
    const auto rows = predict::validate_system(*system, [&](const std::string& model) {
      double flops = 0;
      return predict::calibrate_from_rate(model, system->batch, system->rate(model), profile_for(f, model, flops, argv));
    });
    predict::print_validation(*system, rows, std::cout);
    return;
  }
  // The strategies first: a bad -s is named before anything else is asked for.
  for (const std::string& s : f.strategies) {
    DLSCALE_CHECK(!s.empty(), "--strategy: an empty name (in a comma-separated list?); give e.g. -s allreduce,tree");
  }
  std::vector<predict::StrategySpec> specs;
  for (const std::string& s : f.strategies) specs.push_back(predict::parse_strategy(s));
  DLSCALE_CHECK(f.calibrate_busy.empty() || !f.calibrate.empty(),
                "--calibrate-busy needs --calibrate: the one-worker record of the same machine");
  std::optional<predict::TtaRun> tta_run;  // checked before the compute and network are asked for
  DLSCALE_CHECK(!f.tta_noise_given || !f.tta.empty(),
                "--tta-noise chooses the noise scale of --tta; give --tta RECORD");
  if (!f.tta.empty()) {
    tta_run = predict::tta_run_from_record(predict::read_json_file(f.tta), f.tta, f.tta_noise);
  }
  DLSCALE_CHECK(f.max_global_batch == 0 || tta_run,
                "--max-global-batch caps the batch of --tta; give --tta RECORD");
  DLSCALE_CHECK(
      !tta_run || f.global_batch == 0,
      "--tta predicts weak scaling (the global batch grows with N); cap it with --max-global-batch "
      "instead of --global-batch");
  const predict::Workload w = make_workload(f, system.get(), argv);
  const predict::Network n = predict::resolve_network(f.network, system.get());
  if (specs.empty()) {
    std::vector<std::string> names;
    if (system != nullptr && !system->strategy.empty()) names = {system->strategy};
    if (names.empty()) names = predict::default_strategies(n.workers_per_node);
    for (const std::string& s : names) specs.push_back(predict::parse_strategy(s));
  }
  predict::PredictOptions o = f.options;
  o.workers = predict::parse_workers(f.workers);
  if (!f.calibrate_busy.empty()) {
    o.busy = std::make_shared<const predict::Workload>(predict::calibrate_busy_from_record(
        predict::read_json_file(f.calibrate_busy), f.calibrate_busy));
  }
  DLSCALE_CHECK(f.copy_gbyte_s >= 0, "--copy-gbyte-s must be >= 0");
  DLSCALE_CHECK(f.batch >= 0 && f.global_batch >= 0, "--batch and --global-batch must be >= 1");
  o.scaling = f.global_batch > 0 ? "strong" : "weak";
  o.batch = f.global_batch > 0 ? f.global_batch : f.batch;
  if (system != nullptr) {
    predict::PredictOptions flags = o;
    system->apply(o);  // the system's cores and buckets, then the flags given
    if (f.cores_given) o.cores_per_node = flags.cores_per_node;
    if (f.buckets_given) o.bucket_mb = flags.bucket_mb;
    if (f.first_bucket_given) o.first_bucket_mb = flags.first_bucket_mb;
    if (f.threads_given) o.threads_per_worker = flags.threads_per_worker;
    if (f.shared_given) o.shared_cores = flags.shared_cores;
    if (f.copy_given) o.copy_bytes_per_s = flags.copy_bytes_per_s;
  }
  predict_and_write(f, w, n, specs, o, tta_run, argv);
}

/// --model and what shapes it.
void add_model_flags(CLI::App* cmd, PredictFlags& f) {
  cmd->add_option(
      "--model,-m", f.model,
      "Zoo model, or a TorchScript module (PATH.pt; with --device-rate or a --system rate)");
  cmd->add_option("--image-size", f.model_options.image_size,
                  "Input size of the zoo model; 0 = its default");
  cmd->add_option(
      "--classes", f.model_options.num_classes,
      "Output classes of the zoo model (a detector's with its background); 0 = its default");
  cmd->add_option(
      "--rois", f.model_options.rois,
      "maskrcnn: RoIs sampled per image, which its FLOP profile counts through the box head (a "
      "quarter through the mask head); 0 = the reference's 512");
  cmd->add_option(
      "--task-file", f.model_options.task_file,
      "The task of a TorchScript --model (YAML, docs/models.md 'Your own model'); without it, "
      "an image classifier");
}

/// Where one worker's compute comes from: a record, or a published figure.
void add_compute_flags(CLI::App* cmd, PredictFlags& f) {
  cmd->add_option(
      "--calibrate", f.calibrate,
      "A 1-worker 'dlscale train --trace T --json FILE' record: forward, backward, optimizer, data "
      "and when each gradient became ready");
  cmd->add_option(
      "--calibrate-busy", f.calibrate_busy,
      "With --calibrate: the same model measured with every core busy ('dlscale train --workers "
      "C --strategy independent --trace T --json FILE', C = the cores); points where C or more "
      "workers share a node's cores (all N with --shared-cores) compute at its speed");
  cmd->add_option(
      "--device-rate", f.device_rate,
      "One device's published samples/s of --model at --batch (instead of --calibrate)");
  cmd->add_option(
      "--backward-from", f.backward_from,
      "With --device-rate: a record (train --trace) whose measured backward profile says when each "
      "gradient is ready; default: in proportion to each layer's FLOPs");
}

/// The network: commbench records, links, workers per node, casts, fabric.
void add_network_flags(CLI::App* cmd, predict::NetworkFlags& net) {
  cmd->add_option(
      "--commbench", net.commbench,
      "A 'dlscale commbench --json' record (repeatable): its allreduce fit gives the "
      "inside-node link, or the between-nodes link when it ran on an emulated cluster of 2+ "
      "hosts, and its sendrecv fit (--op allreduce,sendrecv) the link's one-way rate, at "
      "which a tree's messages go; a --dtype f16 or bf16 record gives that wire type's own "
      "rate at its level");
  cmd->add_option("--link-gbps", net.link_gbps, "Between nodes: Gbit/s of each node's link");
  cmd->add_option("--latency-us", net.latency_us,
                  "Between nodes: latency of one message, microseconds");
  cmd->add_option("--intra-gbps", net.intra_gbps, "Inside a node: Gbit/s of each worker's link");
  cmd->add_option("--intra-latency-us", net.intra_latency_us,
                  "Inside a node: latency, microseconds");
  cmd->add_option("--workers-per-node,--gpus-per-node", net.workers_per_node,
                  "Workers per node; 0 = the system's (1)");
  cmd->add_option("--cast-gbyte-s", net.cast_gbyte_s,
                  "fp32 GB/s of a cast to fp16/bf16 (+fp16, +bf16); < 0 = the system's");
  cmd->add_option(
      "--fabric-nodes", net.fabric_nodes,
      "A shared fabric: nodes under one leaf switch, whose one uplink all their traffic to other "
      "groups shares (node i in group i / G); 0 = none (a non-blocking switch); default: the "
      "system's");
  cmd->add_option(
      "--fabric-gbps", net.fabric_gbps,
      "With --fabric-nodes: Gbit/s of each group's uplink, each way; default: the system's");
}

}  // namespace

void add_predict_command(CLI::App& app, const std::vector<std::string>& argv) {
  auto f = std::make_shared<PredictFlags>();
  CLI::App* cmd = app.add_subcommand("predict", kPredictAbout);
  add_model_flags(cmd, *f);
  add_compute_flags(cmd, *f);
  cmd->add_option("--system", f->system,
                  "A system file, or the name of a shipped one (examples/systems/NAME.yaml): network, workers per "
                  "node, strategy and published rates");
  add_network_flags(cmd, f->network);
  cmd->add_option("--strategy,-s", f->strategies,
                  "Strategies, comma-separated or repeated: allreduce | allreduce-hd | tree | "
                  "hierarchical | ps[:K|:node] "
                  "| zero[:1|2|3], with +flat, +fp16, +bf16 and for ps +dedicated, +async, "
                  "+node-aggregate, +greedy, "
                  "+partition:MB, +update-then-pull (docs/predict.md); "
                  "default: the system's, else allreduce, allreduce+flat, tree, hierarchical, "
                  "ps:1, allreduce+fp16")
      ->delimiter(',');
  cmd->add_option("--workers,-n", f->workers,
                  "N to predict: 1,2,4 | A-B (powers of two) | A-B:STEP | A-B:xF; up to 100,000,000")
      ->capture_default_str();
  cmd->add_option("--batch,-b", f->batch,
                  "Per worker (weak scaling); 0 = the calibration's. With --device-rate, also the batch of that "
                  "figure");
  cmd->add_option("--global-batch", f->global_batch, "Strong scaling: the global batch, split over N");
  cmd->add_option("--bucket-mb", f->options.bucket_mb, "Bucket size, MiB (0 = one bucket)")->capture_default_str();
  cmd->add_option("--first-bucket-mb", f->options.first_bucket_mb, "First bucket, MiB")->capture_default_str();
  cmd->add_option("--input-rate", f->options.input_samples_per_s,
                  "One worker's input pipeline samples/s ('dlscale data bench'); 0 = never the limit");
  cmd->add_option("--cores-per-node", f->options.cores_per_node,
                  "Cores of a node: more workers' threads than this slow compute in proportion; 0 = the "
                  "system's, or none");
  cmd->add_option("--shared-cores", f->options.shared_cores,
                  "Cores that all workers share (an emulated cluster on one machine, docs/cluster.md): more "
                  "threads than this slow compute in proportion; 0 = the system's, or none");
  cmd->add_option("--copy-gbyte-s", f->copy_gbyte_s,
                  "With --shared-cores: GB/s at which those cores move a rank's bytes (the unshaped link's "
                  "commbench bandwidth); what a rank sends then takes CPU time from backward. 0 = the system's, or "
                  "free");
  cmd->add_option("--threads-per-worker", f->options.threads_per_worker,
                  "Compute threads of each worker, for --cores-per-node")->capture_default_str();
  cmd->add_option(
      "--tta", f->tta,
      "Time to accuracy at each N: a 'dlscale train --target-accuracy A --noise-scale --json FILE' "
      "record that reached its target; its epochs, global batch and gradient noise scale give the "
      "epochs at N x batch (McCandlish et al. 2018), times the predicted step: hours to target, "
      "speedup, the fastest and the cheapest N per strategy (docs/predict.md)");
  cmd->add_option(
         "--tta-noise", f->tta_noise,
         "With --tta: the noise scale its model takes as B_crit: auto (the one at the final "
         "weights where the record has it, from train --noise-final, else the one over "
         "training; Adam's preconditioned one where measured, else B_simple), simple, adam "
         "(over training), final or final-adam (at the final weights); docs/predict.md")
      ->check(CLI::IsMember(predict::tta_noise_kinds()))
      ->capture_default_str();
  cmd->add_option(
      "--max-global-batch", f->max_global_batch,
      "With --tta: the global batch grows as N x --batch up to this, then stays (each worker's "
      "batch shrinks); 0 = no cap");
  cmd->add_flag("--validate", f->validate,
                "Predict each published figure of --system from its one-device rate and print the errors");
  cmd->add_option("--json", f->json, "Write the prediction record here (atomically)");
  cmd->add_option("--html", f->html, "Write a self-contained HTML page: efficiency and throughput against N");
  cmd->callback([f, argv, cmd] {
    f->cores_given = cmd->count("--cores-per-node") > 0;
    f->buckets_given = cmd->count("--bucket-mb") > 0;
    f->first_bucket_given = cmd->count("--first-bucket-mb") > 0;
    f->threads_given = cmd->count("--threads-per-worker") > 0;
    f->shared_given = cmd->count("--shared-cores") > 0;
    f->copy_given = cmd->count("--copy-gbyte-s") > 0;
    f->tta_noise_given = cmd->count("--tta-noise") > 0;
    f->options.copy_bytes_per_s = f->copy_gbyte_s * 1e9;
    run(*f, argv);
  });
}

}  // namespace dlscale::cli
