#pragma once
// --strategy zero: sharded data parallelism as ZeRO stages 1, 2 and 3
// (docs/strategies.md, "Sharded data parallelism"), on the bucketing and
// overlap of libtorch/dp/bucketed_sync.h.
//  - each bucket is a flat buffer padded to a multiple of the workers, split
//    evenly (FSDP's way): worker r owns chunk r of every bucket;
//  - the parameters become views of flat per-bucket parameter buffers;
//  - a complete bucket of gradients (averaged as it is packed) is
//    reduce-scattered on the communication thread, overlapping the rest of
//    the backward pass: each worker receives the mean of its own chunk;
//  - the worker's optimizer holds state for its chunks only: its parameters
//    are the pieces of the model's tensors inside them (a weight's as
//    [1, n], so the bias-and-norm group stays right; LARS sums each
//    tensor's squared norms over the pieces and the workers in one small
//    allreduce per step); it steps them at the trainer's current learning
//    rate, then every bucket's parameters are all-gathered in place;
//  - stage 1 keeps the full gradient buffers between steps (the reduced
//    chunk lands in the worker's own slice of them); stage 2 keeps only the
//    reduced chunks: a bucket's buffer lives from its first gradient until
//    its reduce-scatter is done;
//  - stage 3 also keeps only its chunks of the parameters: by default the
//    whole model is one unit (FSDP's root-only wrapping), its flat buffers
//    freed after backward (their storage, so autograd's references stay
//    valid) and all-gathered from the chunks when next needed
//    (need_parameters: a step's forward, an evaluation, the end of the run);
//  - --zero-unit block: one bucket per unit of the model (libtorch/models/units.h),
//    gathered on a thread and communicator of its own just before the
//    unit's forward and again before its backward (a hook on its output),
//    the next unit prefetched, and freed after each; the rest of the model
//    is one more bucket, gathered for the whole step.
// The parameters' own .grad tensors are released after backward.
#include <memory>
#include <vector>

#include "libtorch/comm/communicator.h"
#include "libtorch/dp/gradient_sync.h"
#include "dp/sync_options.h"

namespace dlscale::dp {

/// The worker's side of --strategy zero over `comm` (at least 2 ranks; it
/// must outlive the sync): uses options.zero_stage, zero_unit, bucket_mb,
/// first_bucket_mb and compress; context.make_optimizer builds the
/// optimizer over the worker's shards; --zero-unit block takes the model's
/// units from the context and listens to them.
std::unique_ptr<GradientSync> make_zero_sync(std::vector<torch::Tensor> params,
                                             comm::Communicator& comm, const SyncOptions& options,
                                             const SyncContext& context);

}  // namespace dlscale::dp
