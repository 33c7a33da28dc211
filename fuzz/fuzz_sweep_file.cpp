// libFuzzer harness: a sweep file, parsed and planned as `dlscale sweep
// --dry-run` does. Any input must plan or throw dlscale::Error, and what
// plans must be safe to write into a Slurm job script's lines: the sweep's
// name and every parameter's name and text value are UTF-8 text without a
// control character (issue 42: a "\n" in a name ran shell commands).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "core/text.h"
#include "sweep/planner.h"
#include "sweep/sweep_file.h"

namespace {

void check_line_safe(const std::string& text) {
  if (!dlscale::is_utf8(text) || dlscale::has_control(text)) std::abort();
}

void check_value(const dlscale::sweep::Value& v) {
  if (v.is_string()) check_line_safe(v.string());
  if (v.is_list()) {
    for (const auto& item : v.list()) check_value(item);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const auto spec = dlscale::sweep::parse_sweep(text, "fuzz.yaml");
    check_line_safe(spec.name);
    dlscale::sweep::PlanOptions options;
    options.train_options = {"model", "batch", "steps", "warmup", "lr", "workers", "strategy"};
    const auto plan = dlscale::sweep::plan_sweep(spec, options);
    for (const auto& run : plan) {
      (void)run.key.size();
      for (const auto& [name, value] : run.params) {
        check_line_safe(name);
        check_value(value);
      }
    }
  } catch (const dlscale::Error&) {
  }
  return 0;
}
