#pragma once
// The units of a model: the blocks that sharded data parallelism gathers
// one at a time (FSDP's wrapped modules; docs/strategies.md, "Stage 3
// units"). A model declares its units in forward order and runs each
// through Model::run_unit(), which tells the observer (the strategy) when a
// unit's parameters are needed and when its forward is done. LibTorch's C++
// modules have no forward hooks, so this is the seam instead.
#include <torch/torch.h>

#include <cstddef>

namespace dlscale::models {

class UnitObserver {
 public:
  virtual ~UnitObserver() = default;
  /// Unit `unit`'s parameters are about to be read by its forward.
  virtual void before_unit(size_t unit) = 0;
  /// Its forward returned `output` (which the model uses from here on); the
  /// observer may register a hook on it to hear of the unit's backward.
  virtual void after_unit(size_t unit, const torch::Tensor& output) = 0;
};

}  // namespace dlscale::models
