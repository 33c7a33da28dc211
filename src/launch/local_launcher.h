#pragma once
// `dlscale train --workers N`: spawns N worker processes on this node, each
// told its rank through the environment, hosts the rendezvous store (node 0),
// and supervises them. If any worker exits with an error, dies, or makes no
// progress for the timeout, every worker is stopped and the job fails with an
// error naming the rank(s) and what they were doing. Never leaves orphans:
// workers die with the launcher (PR_SET_PDEATHSIG).
#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "core/enum_names.h"
#include "core/error.h"
#include "core/job_env.h"

namespace dlscale::launch {

struct LaunchPlan {
  std::string binary;             ///< executable to run (usually /proc/self/exe)
  /// When set, workers are forks of this process that run it with `argv`
  /// instead of exec'ing `binary` (SpawnOptions::run); this process must
  /// then have computed on one thread only (set_compute_threads(1)).
  int (*run)(int argc, char** argv) = nullptr;
  std::vector<std::string> argv;  ///< its arguments, argv[0] included
  int workers = 1;                ///< local workers
  int servers = 0;                ///< extra processes on node 0, ranks 0..servers-1 (PS shards)
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  std::string master_bind;        ///< the store's listen address; "" = master_addr
  int master_port = 0;            ///< 0 with one node: pick a free port
  int threads_per_worker = 1;     ///< sets OMP_NUM_THREADS and, with bind_cores, the pinning
  bool bind_cores = false;
  bool verbose_ranks = false;     ///< all ranks' stdout (default: rank 0 only)
  std::chrono::milliseconds timeout{60000};  ///< no progress this long = stalled
};

/// Which kind of cause a failed job's error names, most telling first: a
/// rank killed by a signal; a rank that failed by itself (bad input, an
/// internal error); a rank stopped or silent; a rank that failed because a
/// peer did; an interrupt. A cluster job compares its hosts' causes.
enum class FailureCause { kKilled, kOwn, kStopped, kStalled, kPeer, kInterrupted, kUnknown };

/// The causes' names ("killed", "own", ...; kUnknown has none).
const EnumNames<FailureCause, 6>& enum_names(FailureCause);

/// A job whose workers failed; carries the exit code the launcher returns.
class JobFailed : public Error {
 public:
  JobFailed(const std::string& message, int exit_code, FailureCause cause = FailureCause::kUnknown)
      : Error(message), exit_code_(exit_code), cause_(cause) {}
  int exit_code() const { return exit_code_; }
  FailureCause cause() const { return cause_; }

 private:
  int exit_code_;
  FailureCause cause_;
};

/// Runs the job to completion. Returns normally when every worker exited 0;
/// throws JobFailed otherwise (after every worker has been stopped and reaped).
void run_local_workers(const LaunchPlan& plan);

/// While alive, SIGINT and SIGTERM only note themselves, so that a launcher
/// can stop its children and report; the previous handlers come back when
/// it ends (also when the launcher throws). One at a time per process.
class InterruptGuard {
 public:
  InterruptGuard();
  ~InterruptGuard();
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;
  /// The signal that arrived since construction, or 0.
  int signal() const;

 private:
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
};

using dlscale::random_job_secret;  ///< core/job_env.h

/// A status line that carries the worker's error: "error: MESSAGE".
inline constexpr const char* kStatusErrorPrefix = "error: ";

/// Writes one progress line ("step 12 backward") to dlscale's launcher; a
/// no-op without a status pipe. Never blocks: if the pipe is full the line is
/// dropped.
class StatusWriter {
 public:
  explicit StatusWriter(int fd) : fd_(fd) {}
  void write(const std::string& status) const;
  /// A spawned worker's final error line, sent to the launcher instead of
  /// printed, so that a failed job prints one line: the launcher's, naming
  /// the cause (docs/errors.md). Returns false when it could not be sent
  /// (no pipe): the caller prints it then.
  bool write_error(const std::string& message) const;

 private:
  int fd_;
};

}  // namespace dlscale::launch
