#pragma once
// `dlscale train` as a job (libtorch/launch/job.h): validates the options once, then
// each worker builds a Trainer and runs it; a strategy with server processes
// (the parameter server) gives some ranks that role instead.
#include <ostream>
#include <string>
#include <vector>

#include "libtorch/launch/job.h"
#include "launch/train_job_options.h"

namespace dlscale::launch {


/// Runs the training job. `out` receives rank 0's report. Throws
/// dlscale::Error on bad input, JobFailed when workers fail and
/// dlscale::PeerFailure when a peer or the network fails.
void run_train(const TrainJobOptions& options, const LaunchEnv& env,
               const std::vector<std::string>& argv, std::ostream& out);

}  // namespace dlscale::launch
