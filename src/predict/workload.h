#pragma once
// What one worker computes in a step, as the predictor needs it: the phase
// times at a batch and when each gradient becomes ready during backward.
// Built from a measured 1-worker record (calibrate_from_record) or from a
// published samples/s figure and a backward profile (calibrate_from_rate).
// No LibTorch.
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace dlscale::predict {

/// One gradient tensor.
struct Gradient {
  int64_t bytes = 0;     ///< fp32 bytes
  double ready_s = 0;    ///< when backward produced it, seconds after backward starts
  int64_t index = -1;    ///< registration order (where a PS places it); -1 = unknown
};

struct Workload {
  std::string model;
  std::string unit = "samples";  ///< what throughput counts (images, samples, tokens)
  int64_t batch = 0;             ///< per worker, where the times below hold
  double data_s = 0;             ///< exposed input time per step
  double forward_s = 0;
  double backward_s = 0;
  double optimizer_s = 0;
  std::vector<Gradient> grads;   ///< in the order they become ready
  double flops_per_sample = 0;   ///< forward, for the record
  std::string source;            ///< where the times came from, for the output
  /// Workers that computed side by side while the times were measured: 1,
  /// or a busy calibration's C (calibrate_busy_from_record).
  int64_t side_by_side = 1;
  int64_t param_bytes() const;
};

/// How backward produces the gradients: each tensor's fp32 bytes in
/// registration order and the share of backward done when it is ready.
struct BackwardProfile {
  std::vector<int64_t> bytes;
  std::vector<double> ready_fraction;  ///< in [0, 1], per tensor
  std::string source;                  ///< "measured (FILE)" or "FLOPs of each layer"
};

/// The profile a record's `results.backward_profile` holds (written by
/// `dlscale train --trace`). Throws dlscale::Error naming `what` and the
/// missing or inconsistent field.
BackwardProfile backward_profile_from_record(const nlohmann::json& record, const std::string& what);

/// A workload from a measured `dlscale train` record (1 worker, with
/// --trace): forward, backward, optimizer and data from its median
/// breakdown, gradient ready times from its backward profile. Throws
/// dlscale::Error naming `what` and the field when one is missing or
/// inconsistent (more than one worker, a failed run).
Workload calibrate_from_record(const nlohmann::json& record, const std::string& what);

/// A workload measured with every core of the machine busy: a `dlscale
/// train --workers C --strategy independent --trace T` record (C workers, no
/// exchange), whose phase times are what one worker computes while the
/// others compute beside it (caches and memory shared; bench/README.md,
/// "Predicted against measured, every core busy"). Throws dlscale::Error as
/// calibrate_from_record does, and for a run of one worker or of another
/// strategy.
Workload calibrate_busy_from_record(const nlohmann::json& record, const std::string& what);

/// A workload from a published figure: `samples_per_s` of one device at
/// `batch`; backward takes `backward_share` of the step (2/3: backward costs
/// twice the forward's FLOPs), forward the rest, the optimizer is inside
/// them; gradients become ready as `profile` says.
Workload calibrate_from_rate(const std::string& model, int64_t batch, double samples_per_s,
                             const BackwardProfile& profile, double backward_share = 2.0 / 3.0);

/// `record[path...]` as a finite number no larger than `hi`; throws
/// dlscale::Error naming `what` and the field when it is missing or not one.
double number_at(const nlohmann::json& record, std::initializer_list<const char*> path,
                 const std::string& what, double hi = HUGE_VAL);

/// Reads a JSON file (a record); throws dlscale::Error naming the path.
nlohmann::json read_json_file(const std::string& path);

}  // namespace dlscale::predict
