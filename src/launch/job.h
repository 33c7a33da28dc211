#pragma once
// `dlscale train` end to end, whatever the launch: one process, a launcher
// spawning local workers, or one worker of a job (spawned, mpirun, srun).
#include <ostream>
#include <string>
#include <vector>

#include "launch/launch_env.h"
#include "train/train_options.h"

namespace dlscale::launch {

/// Runs the job this process is part of. `out` receives rank 0's report.
/// Throws dlscale::Error on bad input and JobFailed when workers fail.
void run_train(const train::TrainOptions& options, const LaunchEnv& env,
               const std::vector<std::string>& argv, std::ostream& out);

}  // namespace dlscale::launch
