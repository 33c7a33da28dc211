#pragma once
// Checkpoints (docs/convergence.md, "Checkpoints"): everything a run needs
// to continue exactly where it stopped, in one file written atomically by
// rank 0:
//   "DLSCALE-CHECKPOINT 1\n"
//   u64 length + JSON metadata (model, world size, next step, history…)
//   u64 length + torch::save of the parameters then the buffers
//   u64 length + the optimizer's own archive (momentum, Adam moments…)
//   u64 length + torch::save of every rank's CPU random-generator state
//   u64 FNV-1a of everything above
// (u64 little-endian). A damaged or foreign file is refused with its name.
#include <torch/torch.h>

#include <string>
#include <vector>

#include "train/checkpoint_meta.h"

namespace dlscale::train {

struct CheckpointState {
  CheckpointMeta meta;
  std::vector<torch::Tensor> tensors;  ///< parameters, then buffers
  std::string optimizer;               ///< torch::serialize archive bytes
  std::vector<torch::Tensor> rng;      ///< CPU generator state of each rank
};

std::string encode_checkpoint(const CheckpointState& state);
/// Throws dlscale::Error naming `name` when `bytes` is not a whole checkpoint
/// or a field of its metadata is wrong (parse_checkpoint_meta).
CheckpointState decode_checkpoint(const std::string& bytes, const std::string& name);

/// The file a checkpoint after `step` steps goes to: `pattern` with every
/// "{step}" replaced by the step (one file per checkpoint), or `pattern`
/// itself (replaced each time).
std::string checkpoint_file(const std::string& pattern, int64_t step);

/// The optimizer's state as bytes, and back into an optimizer built over
/// the same parameters.
std::string save_optimizer(const torch::optim::Optimizer& optimizer);
void load_optimizer(torch::optim::Optimizer& optimizer, const std::string& bytes);

}  // namespace dlscale::train
