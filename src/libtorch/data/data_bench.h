#pragma once
// `dlscale data bench`: the input pipeline alone, without a model — how many
// samples/s it can feed (docs/data.md, "data bench").
#include <nlohmann/json.hpp>

#include <ostream>
#include <string>

#include "data/data_bench_options.h"

namespace dlscale::data {

/// Reads `options.steps` batches after `options.warmup`, prints the rate to
/// `out` and returns the record.
nlohmann::json run_data_bench(const DataBenchOptions& options, std::ostream& out);

}  // namespace dlscale::data
