// libFuzzer harness: the checkpoint reader (train/checkpoint_meta.h) on
// files it did not write, as `--resume` meets them: a file edited by hand, a
// foreign or truncated file. The input's first byte picks how the rest is
// used:
//   even: the whole file, as read from disk (header, sections, checksum);
//   odd:  the metadata JSON, framed by the harness into a checkpoint with a
//         valid checksum, so that hostile metadata gets past the checksum as
//         a hand edit that recomputed it would.
// The reader must return or throw dlscale::Error. What it accepts is checked
// further: every field is in range, and it survives to_json and a second
// parse unchanged. (The tensor sections are LibTorch's own torch::save
// archives, read by torch::load; they are not fuzzed here.)
#include <cmath>
#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "train/checkpoint_meta.h"

namespace {

using dlscale::train::CheckpointMeta;

void check(bool ok) {
  if (!ok) std::abort();
}

void check_ranges(const CheckpointMeta& m) {
  check(!m.model.empty() && !m.optimizer.empty());
  check(m.world_size >= 1 && m.global_batch >= 1 && m.steps >= 1);
  check(m.next_step >= 0 && m.next_step <= m.steps);
  check(m.run_seconds >= 0);
  int64_t last = m.next_step - 1;
  for (const auto& [step, rate] : m.lr_curve) {
    check(step > last && rate >= 0);
    last = step;
  }
  for (const auto& e : m.evals) {
    check(e.step >= 0 && e.step <= m.steps && e.samples >= 0 && e.seconds >= 0 && e.run_seconds >= 0);
    for (const auto& [name, value] : e.metrics) check(std::isfinite(value));
  }
}

/// What the reader accepted, written and read again, must be the same.
void check_round_trip(const CheckpointMeta& m) {
  const nlohmann::json again = dlscale::train::to_json(m);
  CheckpointMeta m2;
  try {
    m2 = dlscale::train::parse_checkpoint_meta(again, "again");
  } catch (const dlscale::Error&) {
    std::abort();  // its own output refused
  }
  check(nlohmann::json(again) == dlscale::train::to_json(m2));
}

/// Reads `bytes` as resume_from does up to the tensors: sections, JSON, fields.
void read(const std::string& bytes) {
  std::vector<std::string> parts;
  try {
    parts = dlscale::train::checkpoint_sections(bytes, "fuzz.bin");
  } catch (const dlscale::Error&) {
    return;
  }
  check(parts.size() == static_cast<size_t>(dlscale::train::kCheckpointSections));
  nlohmann::json meta;
  try {
    meta = nlohmann::json::parse(parts[0]);
  } catch (const nlohmann::json::exception&) {
    return;  // "metadata is not JSON"
  }
  CheckpointMeta m;
  try {
    m = dlscale::train::parse_checkpoint_meta(meta, "fuzz.bin");
  } catch (const dlscale::Error&) {
    return;
  }
  check_ranges(m);
  check_round_trip(m);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) {
    read(rest);
  } else {
    read(dlscale::train::frame_checkpoint({rest, "", "", ""}));
  }
  return 0;
}
