#pragma once
// `dlscale commbench` as a job: launched like `dlscale train` (local
// workers, mpirun, srun, several nodes), each worker runs the benchmark and
// rank 0 prints the table and writes the record.
#include <ostream>
#include <string>
#include <vector>

#include "libtorch/commbench/commbench.h"
#include "libtorch/launch/job.h"

namespace dlscale::commbench {

/// Validates `options`, runs the job and, on rank 0, writes the JSON record
/// (atomically) when asked. Throws dlscale::Error for bad input (before any
/// work) and InternalError when a result was wrong.
void run_commbench_job(const CommbenchOptions& options, const launch::JobOptions& job,
                       const launch::LaunchEnv& env, const std::vector<std::string>& argv,
                       std::ostream& out);

}  // namespace dlscale::commbench
