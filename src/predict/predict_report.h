#pragma once
// `dlscale report --type predict`: every measured run of a selection next
// to what the scaling model predicts for it, with the error of each
// (docs/predict.md). Each run's own record says what it ran (model, batch,
// workers, strategy, buckets, threads, the emulated cluster's link and
// racks); the compute comes from 1-worker calibration records, the
// unshaped links from a base network (commbench records or a system file),
// a shaped link or uplink from a commbench across one of its rate, else
// its nominal rate.
#include <map>
#include <string>
#include <vector>

#include "predict/predictor.h"
#include "predict/tta.h"
#include "report/report.h"

namespace dlscale::predict {

struct SweepCheckInputs {
  std::vector<Workload> calibrations;  ///< one per model, matched by name
  /// --calibrate-busy: one per model, measured with every core busy
  /// (calibrate_busy_from_record); where given, runs of at least as many
  /// workers as it measured (and 2) compute at its times instead of the
  /// 1-worker record's (PredictOptions::busy).
  std::vector<Workload> busy_calibrations;
  Network base;                        ///< links a run's record does not shape
  int shared_cores = 0;                ///< cores all workers share; 0 = each record's online cores
  double copy_bytes_per_s = 0;         ///< those cores' rate of moving a rank's bytes (0 = free)
  /// The same for fp16 and bf16 (0 = copy_bytes_per_s).
  std::array<double, 2> wire16_copy_bytes_per_s{};
  /// What a shaped hop (a link or an uplink) of a nominal rate in Mbit/s
  /// delivers each way, bytes/s, measured by a commbench across it; a rate
  /// not measured is taken as nominal.
  std::map<double, double> shaped_bytes_per_s;
};

/// Splits `--commbench` records for `report --type predict`: one taken
/// across a shaped hop of an emulated cluster (shaped_hop_mbit) goes into
/// `inputs.shaped_bytes_per_s` (float32 records only); the others are left
/// in `paths`, for the base network. Throws dlscale::Error naming a bad
/// record.
void take_shaped_commbench(std::vector<std::string>& paths, SweepCheckInputs& inputs);

/// The first completed repeat's `dlscale train` record of a stored run
/// (with its inputs), or null.
nlohmann::json stored_train_record(const sweep::RunRecord& run);

/// The strategy a train record's inputs describe, as predict writes it
/// ("allreduce+flat", "ps:2+async", "zero:3", ...); "" for independent.
std::string strategy_of_record(const nlohmann::json& inputs);

/// One row per completed run with workers > 1: measured and predicted
/// samples/s, the error, the bottleneck; notes give the median and largest
/// absolute errors. Throws dlscale::Error when no run could be predicted,
/// naming why (no calibration for its model, no record).
report::Report predict_report(const std::vector<sweep::RunRecord>& runs, const SweepCheckInputs& inputs);

/// `report --type predict --tta RECORD`: one row per completed run (1 or
/// more workers) that trained the record's model to its metric and target:
/// measured steps and training time to target beside what `predict --tta`'s
/// model gives at the run's global batch, times the scaling model's step
/// for the run; notes give the median and largest errors (the record's own
/// run, `tta_record`, left out). Runs that did not reach the target show
/// the prediction alone. Throws dlscale::Error when no run matches.
report::Report predict_tta_report(const std::vector<sweep::RunRecord>& runs,
                                  const SweepCheckInputs& inputs, const TtaRun& tta,
                                  const nlohmann::json& tta_record);

}  // namespace dlscale::predict
