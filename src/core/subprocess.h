#pragma once
// Runs one child program to completion with a wall-clock limit, its stdout
// and stderr captured to a log file. Used by the sweep runner, which must
// survive anything a run does (crash, hang, out of memory).
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/child_process.h"

namespace dlscale {

struct SubprocessOptions {
  std::vector<std::string> argv;  ///< argv[0] is looked up on PATH when it has no '/'
  std::string log_path;           ///< stdout and stderr go here (truncated first)
  double timeout_s = 0;           ///< wall-clock limit; 0 = none
  double kill_grace_s = 5;        ///< SIGTERM, then SIGKILL after this long
  /// Called about every `tick_s` while the child runs (progress display);
  /// returning false stops the child (reported as `interrupted`).
  std::function<bool()> on_tick;
  double tick_s = 0.5;
};

struct SubprocessResult {
  int exit_code = 0;         ///< valid when signal == 0 and !timed_out
  int signal = 0;            ///< the signal that ended the child, if any
  bool timed_out = false;    ///< stopped by dlscale after timeout_s
  bool interrupted = false;  ///< stopped because on_tick returned false
  bool exec_failed = false;  ///< argv[0] could not be executed (see the log)
  double wall_s = 0;
  bool ok() const { return exit_code == 0 && signal == 0 && !timed_out && !interrupted && !exec_failed; }
  /// "exited with code 3", "killed by signal 9 (SIGKILL)", "timed out after 30 s", ...
  std::string describe(double timeout_s) const;
};

/// Runs the child in its own process group (the whole group is stopped on
/// timeout or interrupt) and waits for it. Throws dlscale::Error only when
/// the log file cannot be created.
SubprocessResult run_subprocess(const SubprocessOptions& options);

/// What the kernel shows of a process (/proc/PID/stat), or nothing when it
/// is gone.
struct ProcState {
  char state = '?';  ///< R, S, D, T (stopped), t (traced), Z, ...
  long ppid = 0;
  bool stopped() const { return state == 'T' || state == 't'; }
};
std::optional<ProcState> proc_state(long pid);

/// Runs a short command (`ip`, `tc`) to completion with stdin from
/// /dev/null, its stdout and stderr together in `output`. Returns its exit
/// code (127 when it could not be started, 128 + n when killed by signal n).
int run_captured(const std::vector<std::string>& argv, std::string* output);
/// The same for a child described in full (its environment, a namespace to
/// enter); its stdin, stdout and stderr are set here. `signal`, when given,
/// receives the signal that ended it, or 0 (an exit code above 128 is not one).
int run_captured(SpawnOptions spawn, std::string* output, int* signal = nullptr);

/// Starts `spawn` with its stdout (and its stderr too, `with_stderr`) into a
/// pipe, reads it into `output` until every holder has closed it, waits for
/// the child and returns it, ended; its stdin (and stderr) are as `spawn`
/// says. Throws dlscale::Error when the pipe or the child cannot be made.
ChildProcess run_reading_output(SpawnOptions spawn, bool with_stderr, std::string* output);

}  // namespace dlscale
