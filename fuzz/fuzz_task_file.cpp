// libFuzzer harness: a task file (models/task_file.h, `--task-file`), as a
// user's hand-written YAML meets it. Any input must parse or throw
// dlscale::Error; what parses is checked further: a built-in task has only
// its own keys' values, in range; a declared task has
// inputs and a target with unique names, shapes and ID ranges in bounds,
// a target that fits its loss and metrics the loss gives.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>

#include "core/error.h"
#include "models/task_file.h"

namespace {

using dlscale::models::LossKind;
using dlscale::models::TensorDecl;

void check(bool ok) {
  if (!ok) std::abort();
}

void check_tensor(const TensorDecl& t) {
  check(!t.name.empty() && t.name.size() <= 64);
  int64_t elements = 1;
  for (const int64_t d : t.shape) {
    check(d >= 1);
    elements *= d;
  }
  check(elements <= (int64_t{1} << 26));
  const bool integer = t.dtype == "int64" || t.dtype == "int32";
  check(integer ? t.high > t.low : t.low == 0 && t.high == 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const auto d = dlscale::models::parse_task_file(text, "fuzz.yaml");
    if (!d.builtin.empty()) {
      check(d.inputs.empty() && d.target.name.empty() && d.name == d.builtin);
      check(d.channels >= 1 && d.channels <= 64 && d.image_size >= 0 && d.image_size <= 4096);
      check(d.channels * d.image_size * d.image_size <= (int64_t{1} << 26));
      check(d.seq_len >= 0 && d.seq_len <= 65536);
      if (d.builtin == "recommendation") {
        check(d.users >= 16 && d.items >= 16);
      } else {
        check(d.builtin == "image-classification" || d.builtin == "translation");
        check(d.users == 0 && d.items == 0);
      }
      check(d.builtin == "translation" || d.seq_len == 0);
      check(d.label_smoothing >= 0 && d.label_smoothing < 1);
      return 0;
    }
    check(!d.inputs.empty() && d.inputs.size() <= 8 && d.items_per_sample >= 1);
    std::set<std::string> names;
    for (const auto& t : d.inputs) {
      check_tensor(t);
      check(names.insert(t.name).second);
    }
    check_tensor(d.target);
    check(names.count(d.target.name) == 0);
    if (d.loss == LossKind::kCrossEntropy)
      check(d.target.dtype == "int64" && d.target.low == 0 && d.target.high >= 2);
    const std::string allowed = " " + dlscale::models::metrics_of(d.loss) + " ";
    for (const auto& m : d.metrics) check(allowed.find(" " + m + " ") != std::string::npos);
    check(d.label_smoothing >= 0 && d.label_smoothing < 1);
  } catch (const dlscale::Error&) {
  }
  return 0;
}
