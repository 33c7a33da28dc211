#pragma once
// `dlscale data bench`: the input pipeline alone, without a model — how many
// samples/s it can feed (docs/data.md, "data bench").
#include <nlohmann/json.hpp>

#include <ostream>
#include <string>

#include "data/data_options.h"

namespace dlscale::data {

struct DataBenchOptions {
  DataOptions data;
  int64_t batch = 64;        ///< samples per batch
  int64_t steps = 50;        ///< batches timed
  int64_t warmup = 5;        ///< batches read before the clock starts
  int64_t image_size = 0;    ///< output side; 0 = the data's (224 when sizes vary)
  int64_t channels = 0;      ///< output channels; 0 = the data's (3 for encoded images)
  uint64_t seed = 42;
  std::string json_path;     ///< result record; "" = none
};

/// Runs the pipeline for warmup + steps batches and returns the record
/// (schema dlscale.data_bench/1), printing a progress line about once a
/// second and a summary to `out`.
nlohmann::json run_data_bench(const DataBenchOptions& options, std::ostream& out);

}  // namespace dlscale::data
