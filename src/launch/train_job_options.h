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

/// The job a launch of `options` runs: the launch flags, the compute's
/// device, `threads` a worker and the strategy's `servers` processes.
JobOptions job_of(const TrainJobOptions& options, int threads, int servers);

/// The checks of a train job that need no LibTorch (the launch flags, then
/// train/train_checks.h's): the front runs them before it starts
/// dlscale-torch, which runs them again with the rest (libtorch/launch/train_job.cpp).
void check_train_job(const TrainJobOptions& options);

}  // namespace dlscale::launch
