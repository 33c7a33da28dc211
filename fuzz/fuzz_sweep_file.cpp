// libFuzzer harness: a sweep file, parsed and planned as `dlscale sweep
// --dry-run` does. Any input must plan or throw dlscale::Error.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "sweep/planner.h"
#include "sweep/sweep_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const auto spec = dlscale::sweep::parse_sweep(text, "fuzz.yaml");
    dlscale::sweep::PlanOptions options;
    options.train_options = {"model", "batch", "steps", "warmup", "lr", "workers", "strategy"};
    const auto plan = dlscale::sweep::plan_sweep(spec, options);
    for (const auto& run : plan) (void)run.key.size();
  } catch (const dlscale::Error&) {
  }
  return 0;
}
