#pragma once
// What `dlscale predict` writes: a table per strategy, the JSON record
// (schema "dlscale.predict/1"), an HTML page of efficiency and throughput
// against N, and the check against a system's published figures.
#include <functional>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "predict/predictor.h"
#include "predict/system_file.h"

namespace dlscale::predict {

/// The lines that say what was predicted: workload, compute source,
/// network, scaling and the one-worker baseline.
std::vector<std::string> prediction_header(const Prediction& p);

/// The N a page charts: all of `ns` (ascending) when few, else about 24
/// spread evenly on a log scale.
std::vector<long long> chart_points(const std::vector<long long>& ns);

/// Header lines (workload, network) and one table per strategy: N, step
/// time, throughput, speedup, efficiency, exposed communication, MB sent
/// by the busiest rank, bottleneck.
void print_prediction(const Prediction& p, std::ostream& out);

/// The record: inputs (workload, network, options) and every point.
nlohmann::json prediction_json(const Prediction& p, const std::vector<std::string>& argv);

/// Efficiency and throughput against N, one line per strategy, then the
/// tables. Long N lists are thinned to about 24 points on the charts.
std::string prediction_html(const Prediction& p);

/// One published point next to its prediction.
struct ValidationRow {
  std::string model;
  long long workers = 0;
  double published_eff_pct = 0;  ///< against the published baseline
  double predicted_eff_pct = 0;  ///< against the predicted baseline
  double published_rate = 0;     ///< samples/s; 0 when only efficiency was published
  double predicted_rate = 0;
  std::string bottleneck;
  std::string source;
};

/// Predicts each published entry of `system` with its strategy from a
/// workload `workload_for(model)` calibrated on the system's one-device
/// rate only. Throws dlscale::Error when the system lacks a strategy, a
/// batch or the rate of a published model.
std::vector<ValidationRow> validate_system(const SystemSpec& system,
                                           const std::function<Workload(const std::string& model)>& workload_for);

/// The validation table with each point's difference in efficiency points
/// and the median and largest absolute differences.
void print_validation(const SystemSpec& system, const std::vector<ValidationRow>& rows, std::ostream& out);

}  // namespace dlscale::predict
