#pragma once
// The checks of `dlscale train`'s options that need neither LibTorch nor
// the model zoo: every number's range, the data, recipe and strategy
// options on their own, the batch over a number of workers, and the output
// paths. The front (`dlscale`) runs them before it starts dlscale-torch, so
// that a usage error costs no LibTorch start (about a second of CPU);
// resolve_train_options() (libtorch/train/resolve.h) runs them again before
// the checks that need the zoo, the devices or the strategy. Each throws
// dlscale::Error with one line naming the flag and what it allows
// (docs/errors.md, "Limits").
#include "train/train_options.h"

namespace dlscale::train {

/// Every option's own range and form, whatever the number of workers.
void check_train_options(const TrainOptions& options);

/// The batch of one worker over `r.world_size` workers, from --batch (weak
/// scaling) or --global-batch (strong): sets r.options.run.batch,
/// r.global_batch and r.strong_scaling. Expects check_train_options() passed.
void resolve_batch(ResolvedTrainOptions& r);

/// The output paths can be written, no two name one file (a {step}
/// checkpoint pattern counted at every step it is written at), none
/// overwrites --resume's file (but --checkpoint continuing it), and
/// --resume's file can be read.
void check_train_outputs(const TrainOptions& options);

}  // namespace dlscale::train
