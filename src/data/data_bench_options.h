#pragma once
// `dlscale data bench`'s options (docs/data.md, "data bench"): torch-free,
// so that the front parses the command; the bench itself is
// libtorch/data/data_bench.h.
#include <cstdint>
#include <string>

#include "data/data_options.h"

namespace dlscale::data {

/// `dlscale data bench`'s flags beside the data's own (DataOptions), their
/// help and their keys in the record's inputs, listed once
/// (core/option_table.h). The record holds the resolved image size and
/// channels, not the flags' 0.
struct DataBenchOptions {
  DataOptions data;
  int64_t batch = 64;        ///< samples per batch
  int64_t steps = 50;        ///< batches timed
  int64_t warmup = 5;        ///< batches read before the clock starts
  int64_t image_size = 0;    ///< output side; 0 = the data's (224 when sizes vary)
  int64_t channels = 0;      ///< output channels; 0 = the data's (3 for encoded images)
  uint64_t seed = 42;
  std::string json_path;     ///< result record; "" = none

  template <typename Self, typename Visitor>
  static void table(Self& s, Visitor&& v) {
    v(Option{"--batch,-b", "Samples per batch", "batch"}, s.batch);
    v(Option{"--steps", "Batches timed", "steps"}, s.steps);
    v(Option{"--warmup", "Batches read before the clock starts", "warmup"}, s.warmup);
    v(Option{"--image-size", "Output height = width; 0 = the data's (224 when image sizes vary)",
             nullptr},
      s.image_size);
    v(Option{"--channels", "Output channels: 1 | 3; 0 = the data's", nullptr}, s.channels);
    v(Option{"--seed", "Sample order and augmentation", "seed"}, s.seed);
    v(Option{"--json", "Write the result record here (atomically)", nullptr}.no_default(),
      s.json_path);
  }
};

/// Runs the pipeline for warmup + steps batches and returns the record
/// (schema dlscale.data_bench/1), printing a progress line about once a
/// second and a summary to `out`.

}  // namespace dlscale::data
