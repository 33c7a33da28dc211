#include "core/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "core/child_process.h"
#include "core/clock.h"
#include "core/error.h"

namespace dlscale {

std::string SubprocessResult::describe(double timeout_s) const {
  if (exec_failed) return "could not start the command";
  if (timed_out) return fmt::format("timed out after {:g} s", timeout_s);
  if (interrupted) return "interrupted";
  if (signal != 0) {
    const char* name = sigabbrev_np(signal);
    return fmt::format("killed by signal {} (SIG{})", signal, name ? name : "?");
  }
  return fmt::format("exited with code {}", exit_code);
}

SubprocessResult run_subprocess(const SubprocessOptions& o) {
  DLSCALE_ASSERT(!o.argv.empty());
  const int log_fd = ::open(o.log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  DLSCALE_CHECK(log_fd >= 0, "cannot write the run log '{}': {}", o.log_path, std::strerror(errno));
  SpawnOptions spawn;
  spawn.argv = o.argv;
  spawn.stdout_fd = log_fd;
  spawn.stderr_fd = log_fd;
  // Its own group: dlscale's launcher and mpirun take their workers with
  // them when it is stopped. It dies with us, even when we are SIGKILLed (a
  // resumed sweep must never measure beside an orphan of the last one).
  spawn.own_group = true;
  spawn.error_prefix = "dlscale: error: ";
  SubprocessResult r;
  const double start = now_seconds();
  ChildProcess child = [&] {
    try {
      return ChildProcess(spawn);
    } catch (...) {
      ::close(log_fd);
      throw;
    }
  }();
  ::close(log_fd);

  double next_tick = start + o.tick_s;
  while (!child.poll()) {
    const double now = now_seconds();
    if (o.timeout_s > 0 && now - start > o.timeout_s) {
      r.timed_out = true;
    } else if (o.on_tick && now >= next_tick) {
      next_tick = now + o.tick_s;
      r.interrupted = !o.on_tick();
    }
    if (r.timed_out || r.interrupted) {
      child.terminate(o.kill_grace_s);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // Whatever the child left in its group (workers of a local launch) goes too.
  child.signal(SIGKILL);
  r.wall_s = now_seconds() - start;
  r.exit_code = child.exit_code();
  r.signal = child.term_signal();
  r.exec_failed = !r.timed_out && !r.interrupted && r.signal == 0 && r.exit_code == kExitExecFailed;
  return r;
}

std::optional<ProcState> proc_state(long pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return std::nullopt;
  const size_t close = stat.rfind(')');  // the command name may hold spaces
  if (close == std::string::npos) return std::nullopt;
  ProcState p;
  std::istringstream fields(stat.substr(close + 1));
  if (!(fields >> p.state >> p.ppid)) return std::nullopt;
  return p;
}

int run_captured(const std::vector<std::string>& argv, std::string* output) {
  SpawnOptions spawn;
  spawn.argv = argv;
  spawn.die_with_parent = false;
  return run_captured(std::move(spawn), output);
}

ChildProcess run_reading_output(SpawnOptions spawn, bool with_stderr, std::string* output) {
  int fds[2];
  DLSCALE_CHECK(::pipe2(fds, O_CLOEXEC) == 0, "cannot create a pipe: {}", std::strerror(errno));
  spawn.stdout_fd = fds[1];
  if (with_stderr) spawn.stderr_fd = fds[1];
  ChildProcess child = [&] {
    try {
      return ChildProcess(spawn);
    } catch (...) {
      ::close(fds[0]);
      ::close(fds[1]);
      throw;
    }
  }();
  ::close(fds[1]);
  output->clear();
  char buf[4096];
  while (true) {
    const ssize_t n = ::read(fds[0], buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    output->append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  child.wait();
  return child;
}

int run_captured(SpawnOptions spawn, std::string* output, int* signal) {
  spawn.stdin_fd = SpawnOptions::kDevNull;
  const ChildProcess child = run_reading_output(std::move(spawn), true, output);
  if (signal != nullptr) *signal = child.term_signal();
  return child.term_signal() != 0 ? 128 + child.term_signal() : child.exit_code();
}

}  // namespace dlscale
