#pragma once
// The keys of the JSON records that `train` and `commbench` write, and the
// names of the metrics a sweep stores from them: spelled once, here, for the
// writers (libtorch/train/train_result.cpp, commbench/), the reader that turns a
// record into metrics (sweep/record_metrics.cpp's extract_metrics) and the reports
// that read the metrics (report/). docs/metrics.md and docs/results.md
// describe them. No LibTorch.
#include <string>

namespace dlscale::record {

// Record schemas and their top-level sections.
inline constexpr const char* kSchema = "schema";
inline constexpr const char* kTrainSchema = "dlscale.train/1";
inline constexpr const char* kCommbenchSchema = "dlscale.commbench/1";
inline constexpr const char* kKind = "kind";  ///< kKindTrain | kKindCommbench
inline constexpr const char* kKindTrain = "train";
inline constexpr const char* kKindCommbench = "commbench";
inline constexpr const char* kStatus = "status";  ///< kStatusOk, or why not
inline constexpr const char* kStatusOk = "ok";
inline constexpr const char* kInputs = "inputs";
inline constexpr const char* kResults = "results";
inline constexpr const char* kModel = "model";              ///< a train record's model
inline constexpr const char* kEnvironment = "environment";  ///< core/sysinfo.h's facts

// model of a train record.
inline constexpr const char* kModelName = "name";
inline constexpr const char* kModelUnit = "unit";  ///< what items_per_sec counts
inline constexpr const char* kModelForwardFlops = "forward_flops_per_sample";

// environment of a record.
inline constexpr const char* kOnlineCores = "online_cores";

/// Keys of a record's inputs that readers (predict/, report/) look up. The
/// writers spell them through these too: the option tables' record keys
/// (core/option_table.h) and the inputs the launcher adds.
namespace input {

inline constexpr const char* kModel = "model";
inline constexpr const char* kBatch = "batch";            ///< per worker
inline constexpr const char* kAccumulate = "accumulate";  ///< micro-batches per step
inline constexpr const char* kThreads = "threads";
inline constexpr const char* kSeed = "seed";
inline constexpr const char* kWorldSize = "world_size";
inline constexpr const char* kStrategy = "strategy";
inline constexpr const char* kCompress = "compress";
inline constexpr const char* kBucketMb = "bucket_mb";
inline constexpr const char* kFirstBucketMb = "first_bucket_mb";
inline constexpr const char* kZeroStage = "zero_stage";
inline constexpr const char* kPsShards = "ps_shards";
inline constexpr const char* kPsPlacement = "ps_placement";
inline constexpr const char* kPsAssign = "ps_assign";
inline constexpr const char* kPsPartitionMb = "ps_partition_mb";
inline constexpr const char* kPsMode = "ps_mode";
inline constexpr const char* kCommbenchDtype = "dtype";  ///< commbench: the messages' element type
/// The emulated cluster a job ran on (null without one): its name, hosts,
/// workers per host, shaped link and racks.
inline constexpr const char* kCluster = "cluster";
inline constexpr const char* kClusterName = "name";
inline constexpr const char* kClusterHosts = "hosts";
inline constexpr const char* kClusterWorkersPerHost = "workers_per_host";
inline constexpr const char* kClusterLinkMbit = "link_mbit";  ///< 0 = unshaped
/// Hosts in each rack of a shared fabric (0 = one switch) and each rack's
/// uplink to the spine (0 = unshaped); docs/cluster.md.
inline constexpr const char* kClusterRackHosts = "rack_hosts";
inline constexpr const char* kClusterUplinkMbit = "uplink_mbit";
/// The TCP congestion control between its hosts (absent in records of
/// clusters made before dlscale set it).
inline constexpr const char* kClusterTcpCc = "tcp_cc";

}  // namespace input

// results of a train record.
inline constexpr const char* kSamplesPerSec = "samples_per_sec";
inline constexpr const char* kItemsPerSec = "items_per_sec";  ///< in the model's unit (tokens, images...)
inline constexpr const char* kSamplesPerSecMean = "samples_per_sec_mean";
inline constexpr const char* kSamplesPerSecUncertainty = "samples_per_sec_uncertainty";
inline constexpr const char* kSamplesPerSecJitter = "samples_per_sec_jitter";
inline constexpr const char* kStepTimeMeanMs = "step_time_mean_ms";
inline constexpr const char* kStepTimeP50Ms = "step_time_p50_ms";
inline constexpr const char* kStepTimeP95Ms = "step_time_p95_ms";
inline constexpr const char* kWallSeconds = "wall_seconds";
/// Training FLOPs per second by the 3 x forward estimate (docs/metrics.md).
inline constexpr const char* kEstTrainGflopsPerSec = "est_train_gflops_per_sec";
inline constexpr const char* kBreakdownMs = "breakdown_ms";  ///< {phase: median ms}
inline constexpr const char* kComm = "comm";                 ///< null on one worker
inline constexpr const char* kData = "data";
inline constexpr const char* kConvergence = "convergence";   ///< null unless the run evaluated
inline constexpr const char* kNoise = "noise";  ///< train --noise-scale: the gradient noise scale
/// Memory per worker: the max over ranks of each figure, and "per_rank".
inline constexpr const char* kMem = "mem";
/// What backward did when, for the predictor (train --profile-backward).
inline constexpr const char* kBackwardProfile = "backward_profile";
inline constexpr const char* kProfileTensors = "tensors";

// results.comm of a train record.
inline constexpr const char* kCommBytesPerStep = "bytes_per_step";
inline constexpr const char* kCommBusyMsP50 = "busy_ms_p50";
inline constexpr const char* kCommAlgbwGbps = "algbw_gbps";
inline constexpr const char* kCommBusbwGbps = "busbw_gbps";
inline constexpr const char* kCommBytesSentFormula = "bytes_sent_per_step_formula";  ///< per rank
inline constexpr const char* kCommBytesSentTcp = "bytes_sent_per_step_tcp";          ///< per rank
inline constexpr const char* kCommReplicasIdentical = "replicas_identical";

// results.convergence of a train record.
inline constexpr const char* kConvergenceStatus = "status";  ///< success | aborted | ""
/// The task's first metric, which a target is on ("top1", "box_acc", ...).
inline constexpr const char* kConvergenceMetric = "metric";
/// That metric at the last evaluation (null without one).
inline constexpr const char* kConvergenceFinalAccuracy = "final_accuracy";
inline constexpr const char* kConvergenceEvals = "evals";
inline constexpr const char* kStatusSuccess = "success";

// results of a commbench record.
inline constexpr const char* kRows = "rows";
inline constexpr const char* kFits = "fits";
inline constexpr const char* kWrong = "wrong";
inline constexpr const char* kRowOp = "op";
inline constexpr const char* kRowBytes = "bytes";
inline constexpr const char* kRowTimeUs = "time_us";
inline constexpr const char* kFitAlphaUs = "alpha_us";
inline constexpr const char* kFitBandwidthGbps = "bandwidth_gbps";

/// Metrics of a run in the results store (sweep/runner.cpp makes them from
/// a record; report/ reads them).
namespace metric {

inline constexpr const char* kSamplesPerSec = "samples_per_sec";
inline constexpr const char* kItemsPerSec = "items_per_sec";  ///< samples/s x the model's items per sample
inline constexpr const char* kStepTimeMs = "step_time_ms";  ///< global batch / samples/s
/// "breakdown_<phase>_ms": results.breakdown_ms, phase by phase.
inline std::string breakdown_ms(const std::string& phase) { return "breakdown_" + phase + "_ms"; }
inline constexpr const char* kBreakdownTotalMs = "breakdown_total_ms";
inline constexpr const char* kBreakdownDataMs = "breakdown_data_ms";
/// Sections whose numbers are stored under a prefix: "comm_bytes_per_step",
/// "data_pipeline_ms_per_batch", "conv_run_s", and "<section>_<key>" for a
/// strategy's own section (the parameter server's "ps_shards", ...).
inline constexpr const char* kCommPrefix = "comm_";
inline constexpr const char* kDataPrefix = "data_";
inline constexpr const char* kConvergencePrefix = "conv_";
/// 1 when the run reached its target, 0 when it was aborted.
inline constexpr const char* kConvergenceSuccess = "conv_success";
/// results.noise.b_simple: the gradient noise scale B_simple
/// (docs/convergence.md).
inline constexpr const char* kNoiseBSimple = "noise_b_simple";
/// results.noise.preconditioned.b_simple: the noise scale of Adam's
/// preconditioned gradient (docs/convergence.md, "The noise scale Adam sees").
inline constexpr const char* kNoiseAdamBSimple = "noise_adam_b_simple";
/// results.noise.final (train --noise-final): B_simple at the final weights,
/// its parts under "noise_final_<key>", and Adam's under this one.
inline constexpr const char* kNoiseFinalBSimple = "noise_final_b_simple";
inline constexpr const char* kNoiseFinalAdamBSimple = "noise_final_adam_b_simple";
/// commbench: the highest busbw of any row.
inline constexpr const char* kBusbwPeak = "busbw_gbps_peak";

}  // namespace metric
}  // namespace dlscale::record
