#pragma once
// The torch-free half of a checkpoint (libtorch/train/checkpoint.h): its framing and
// its metadata. Everything read back from a file is validated here, field
// by field, so that a file edited by hand (even with a valid checksum) is
// refused in one line, "checkpoint FILE is damaged: FIELD ...", and never
// reaches the trainer as a negative step or a string where a number goes.
// No LibTorch: the checkpoint fuzzer (fuzz/fuzz_checkpoint.cpp) uses it alone.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "train/convergence.h"

namespace dlscale::train {

/// The first line of every checkpoint file.
inline constexpr const char kCheckpointMagic[] = "DLSCALE-CHECKPOINT 1\n";
/// Sections after the magic: metadata, tensors, optimizer, random generators.
inline constexpr int kCheckpointSections = 4;

/// Frames `sections` (u64 little-endian length + bytes each) after the magic
/// and appends the FNV-1a of everything.
std::string frame_checkpoint(const std::vector<std::string>& sections);
/// The sections of a framed checkpoint. Throws dlscale::Error naming `name`
/// when the header, a length or the checksum is wrong.
std::vector<std::string> checkpoint_sections(const std::string& bytes, const std::string& name);

/// What a checkpoint says about the run that wrote it.
struct CheckpointMeta {
  std::string model;
  int world_size = 1;
  int64_t global_batch = 1;
  std::string optimizer;
  int64_t parameters = 0;  ///< parameter tensors
  int64_t buffers = 0;     ///< buffer tensors
  uint64_t seed = 0;
  std::string data;
  int64_t next_step = 0;   ///< the first step a resumed run trains
  int64_t steps = 1;       ///< the writing run's length
  double run_seconds = 0;  ///< run time before the checkpoint
  /// (step, rate) samples of the learning-rate curve from next_step on;
  /// empty in checkpoints written before the curve was kept.
  std::vector<std::pair<int64_t, double>> lr_curve;
  /// The task's quality metrics, which `evals` hold; empty in checkpoints
  /// written before tasks named them (image classification's top1, top5).
  std::vector<MetricSpec> metrics;
  std::vector<EvalRecord> evals;
};

nlohmann::json to_json(const CheckpointMeta& meta);
/// Reads and validates every field: types, ranges (world size and batch
/// >= 1, 0 <= next_step <= steps, finite non-negative times, positive
/// rates, evaluations holding every metric, fractions in [0, 1]). Throws dlscale::Error
/// "checkpoint NAME is damaged: FIELD ..." naming the first bad field.
CheckpointMeta parse_checkpoint_meta(const nlohmann::json& meta, const std::string& name);

}  // namespace dlscale::train
