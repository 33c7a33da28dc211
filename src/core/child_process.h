#pragma once
// One child process, owned (RAII): every fork/exec of dlscale goes through
// it — a sweep's runs, `ip`/`tc`, local workers, the cluster's node
// launchers. Everything the child needs is prepared before fork; after it
// the child makes system calls only. A ChildProcess that is destroyed while
// its process runs kills and reaps it: no orphan, no zombie. A child given
// `run` instead of a program to exec is the exception: it goes on running
// this process's code.
#include <sys/types.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace dlscale {

/// How to start a child.
struct SpawnOptions {
  static constexpr int kInherit = -1;  ///< keep this process's stream
  static constexpr int kDevNull = -2;  ///< /dev/null

  std::vector<std::string> argv;  ///< argv[0] included
  /// The file to execute; "" = argv[0], looked up on PATH when it has no '/'.
  std::string program;
  /// Variables replaced or added; the rest of this process's environment is inherited.
  std::vector<std::pair<std::string, std::string>> set_env;
  int stdin_fd = kDevNull;
  int stdout_fd = kInherit;
  int stderr_fd = kInherit;
  /// More descriptors to pass: (descriptor here, its number in the child).
  std::vector<std::pair<int, int>> pass_fds;
  /// Its own process group: signal() and terminate() then reach everything
  /// it started too.
  bool own_group = false;
  /// SIGKILLed when this process dies (PR_SET_PDEATHSIG); a child whose
  /// parent is already gone exits at once. SIGINT/SIGTERM are default in it.
  bool die_with_parent = true;
  std::vector<int> cpus;  ///< pinned to these CPUs; empty = not pinned
  /// Runs in the child after fork, before exec (system calls only): returns
  /// 0, or an errno with `*what` naming what failed; the child then writes
  /// "<error_prefix><name>: cannot <what>: <why>" to its stderr and exits 2.
  std::function<int(const char** what)> enter;
  std::string name = "child";  ///< for those messages ("host 2")
  /// Starts the line the child writes when exec fails ("cannot run 'X': why", exit 127).
  std::string error_prefix;
  /// Instead of exec: the child runs run(argc, argv) with `argv`, and exits
  /// with what it returns (an exception that escapes it: exit 1). It is this
  /// program already loaded (LibTorch's ~1 s of loading a process, saved).
  /// As exec would, the child first closes the descriptors marked
  /// close-on-exec and takes the environment with `set_env`. Only for a
  /// caller whose other threads hold no lock the child needs (stdio is
  /// flushed before fork); `program` is then only named in messages.
  int (*run)(int argc, char** argv) = nullptr;
};

/// Exit code of a child whose exec failed.
inline constexpr int kExitExecFailed = 127;

class ChildProcess {
 public:
  ChildProcess() = default;
  /// Starts the child; throws dlscale::Error naming argv[0] when fork fails.
  explicit ChildProcess(const SpawnOptions& options);
  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  /// Kills (SIGKILL, its group too) and reaps a child still running.
  ~ChildProcess();

  pid_t pid() const { return pid_; }
  bool started() const { return pid_ > 0; }
  bool running() const { return pid_ > 0 && !ended_; }
  /// Reaps the child if it has ended, without blocking; returns whether it
  /// has (true for one never started).
  bool poll();
  /// Waits until it ends.
  void wait();
  /// Sends `sig` to the child, or to its whole group (own_group); also after
  /// it ended, to what its group left running.
  void signal(int sig) const;
  /// SIGTERM, then SIGKILL when it has not ended within `grace_s`; reaps it.
  void terminate(double grace_s);

  /// Lets the child go on without this object: it is neither killed nor
  /// waited for here (a daemon that outlives the command starting it).
  /// Returns its pid.
  pid_t release();

  int exit_code() const { return exit_code_; }      ///< 0 unless it exited non-zero
  int term_signal() const { return term_signal_; }  ///< the signal that ended it, or 0
  bool failed() const { return ended_ && (exit_code_ != 0 || term_signal_ != 0); }
  /// "exited with code 3" | "was killed by signal 9 (SIGKILL)".
  std::string describe_exit() const;

 private:
  void record(int status);

  pid_t pid_ = -1;
  bool own_group_ = false;
  bool ended_ = false;
  int exit_code_ = 0;
  int term_signal_ = 0;
};

/// SIGTERM to every running child at once, then up to `grace_s` for all to
/// end (calling `while_waiting` about every 20 ms), then SIGKILL to the rest;
/// every one is reaped.
void terminate_all(const std::vector<ChildProcess*>& children, double grace_s,
                   const std::function<void()>& while_waiting = {});

/// The executable that starts this program again (executed workers, a
/// sweep's runs, a host's agent): "/proc/self/exe", unless set_self_executable
/// named another. A process that runs dlscale-torch's entry without being
/// that binary (a test's fork, tests/process_util.h) names the binary.
std::string self_executable();
void set_self_executable(std::string path);

}  // namespace dlscale
