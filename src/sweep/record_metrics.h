#pragma once
// A run's record as the metrics the results store keeps (core/record_keys.h
// names both): samples/s, the breakdown, communication, the input pipeline,
// convergence and a strategy's own section from a dlscale record; the
// rows and fits of a commbench record; samples/s from an external
// command's log.
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "sweep/planner.h"

namespace dlscale::sweep {

/// Metrics of one successful repeat from the dlscale JSON record or, for an
/// external run, from the throughput pattern in its log. Throws
/// dlscale::Error naming what is missing.
std::map<std::string, double> extract_metrics(const Params& params, const std::string& record_json,
                                              const std::string& log_text);

/// What a dlscale record says about the software and machine it ran on,
/// added to `versions`.
void add_program_versions(const std::string& record, nlohmann::json& versions);

}  // namespace dlscale::sweep
