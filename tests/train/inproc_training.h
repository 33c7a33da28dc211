#pragma once
// Training over in-process ranks (threads on the inproc communicator): what
// the seam tests compare with one worker. The ranks share one random
// generator, so a model trained this way must take its weights from zeros
// or a formula, not from the generator.
#include <vector>

#include "comm/comm_test_util.h"
#include "libtorch/train/train_result.h"
#include "libtorch/train/trainer.h"

namespace dlscale::testing {

/// Rank 0's outcome of a run.
struct RankZeroRun {
  train::TrainResult result;
  std::vector<torch::Tensor> parameters;  ///< after the run
};

/// Trains `options` over `world` in-process ranks.
inline RankZeroRun train_in_process(int world, const train::TrainOptions& options) {
  RankZeroRun out;
  train::TrainObserver quiet;
  comm::testing::run_ranks("inproc", world, [&](comm::Communicator& comm) {
    train::WorkerContext ctx;
    ctx.rank = comm.rank();
    ctx.world_size = world;
    ctx.local_rank = comm.rank();
    ctx.local_world_size = world;
    ctx.comm = world > 1 ? &comm : nullptr;
    train::Trainer t(options, ctx);
    train::TrainResult r = t.run(quiet);
    if (comm.rank() != 0) return;
    out.result = std::move(r);
    for (const auto& p : t.model().parameters()) out.parameters.push_back(p.detach().clone());
  });
  return out;
}

}  // namespace dlscale::testing
