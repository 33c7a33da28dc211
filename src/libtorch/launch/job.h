#pragma once
// A job end to end, whatever the launch: one process, a launcher spawning
// local workers, or one worker of a job (spawned, mpirun, srun). `dlscale
// train` (libtorch/launch/train_job.h) and `dlscale commbench` (libtorch/commbench/commbench_job.h)
// are both jobs; they differ in the body each worker runs.
#include <chrono>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "libtorch/comm/communicator.h"
#include "launch/launch_options.h"
#include "launch/launch_env.h"
#include "launch/local_launcher.h"

namespace dlscale::launch {

/// What a worker's body is handed.
struct WorkerSlot {
  const LaunchEnv* env = nullptr;
  comm::Communicator* comm = nullptr;  ///< null when the job is one process
  /// Ranks with the same name share a node: the launcher's node index for
  /// spawned workers, else the host name.
  std::string node_name;
  StatusWriter status{-1};
  bool prints = true;  ///< rank 0, or every rank with --verbose-ranks
};
using WorkerBody = std::function<void(WorkerSlot&)>;

/// The program's entry (its main): a launcher of a CPU job then starts its
/// workers as forks of itself that run it, instead of exec'ing
/// /proc/self/exe, which would load LibTorch again (~1 s of CPU a worker).
/// Not for a GPU job (CUDA does not survive fork), nor --backend mpi, nor
/// with DLSCALE_WORKER_EXEC=1. Set once, before the command runs.
void set_worker_entry(int (*entry)(int argc, char** argv));

/// Before a command that may launch workers computes anything: a process
/// that is not a worker computes on one thread, so that no thread pool
/// lives in it when it forks its workers (a lone process sets its own
/// threads when it trains).
void prepare_launcher(const LaunchEnv& env);

/// Runs the job this process is part of: a worker joins the communicator
/// and runs `body`; a launcher (workers > 1 or nnodes > 1) spawns workers
/// that re-run `argv`; a lone process runs `body` without a communicator.
/// Throws dlscale::Error on bad input, JobFailed when workers fail and
/// dlscale::PeerFailure when a peer or the network fails.
void run_job(const JobOptions& options, const LaunchEnv& env, const std::vector<std::string>& argv,
             const WorkerBody& body);

}  // namespace dlscale::launch
