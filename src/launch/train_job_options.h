#pragma once
// `dlscale train`'s options, torch-free: the front executable parses them
// (docs/architecture.md, "Two executables").
#include "launch/launch_options.h"
#include "train/train_options.h"

namespace dlscale::launch {

/// `dlscale train`'s options: the training's and the launch's.
struct TrainJobOptions {
  train::TrainOptions train;
  LaunchOptions launch;
};

}  // namespace dlscale::launch
