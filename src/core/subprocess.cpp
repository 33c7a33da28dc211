#include "core/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>

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

namespace {

constexpr int kExecFailed = 127;

/// Sends `sig` to the child's process group, waits up to `grace_s` for it to end.
bool stop_group(pid_t pid, int sig, double grace_s, int* status) {
  ::kill(-pid, sig);
  const double deadline = now_seconds() + grace_s;
  while (now_seconds() < deadline) {
    if (::waitpid(pid, status, WNOHANG) == pid) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

}  // namespace

SubprocessResult run_subprocess(const SubprocessOptions& o) {
  DLSCALE_ASSERT(!o.argv.empty());
  const int log_fd = ::open(o.log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  DLSCALE_CHECK(log_fd >= 0, "cannot write the run log '{}': {}", o.log_path, std::strerror(errno));
  std::vector<char*> args;
  for (const std::string& a : o.argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);

  SubprocessResult r;
  const double start = now_seconds();
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(log_fd);
    throw Error(fmt::format("cannot start '{}': {}", o.argv[0], std::strerror(errno)));
  }
  if (pid == 0) {
    // The run dies with us, even when we are SIGKILLed (a resumed sweep must
    // never measure beside an orphan of the last one); dlscale's launcher
    // and mpirun take their workers with them.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(kExecFailed);
    ::setpgid(0, 0);
    ::dup2(log_fd, STDOUT_FILENO);
    ::dup2(log_fd, STDERR_FILENO);
    const int null_fd = ::open("/dev/null", O_RDONLY);
    if (null_fd >= 0) ::dup2(null_fd, STDIN_FILENO);
    ::execvp(args[0], args.data());
    const std::string msg = fmt::format("dlscale: error: cannot run '{}': {}\n", o.argv[0], std::strerror(errno));
    [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, msg.data(), msg.size());
    ::_exit(kExecFailed);
  }
  ::setpgid(pid, pid);  // also in the parent, so that kill(-pid) works at once
  ::close(log_fd);

  int status = 0;
  double next_tick = start + o.tick_s;
  while (true) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    const double now = now_seconds();
    bool stop = false;
    if (o.timeout_s > 0 && now - start > o.timeout_s) {
      r.timed_out = true;
      stop = true;
    } else if (o.on_tick && now >= next_tick) {
      next_tick = now + o.tick_s;
      if (!o.on_tick()) {
        r.interrupted = true;
        stop = true;
      }
    }
    if (stop) {
      if (!stop_group(pid, SIGTERM, o.kill_grace_s, &status)) {
        stop_group(pid, SIGKILL, 1e9, &status);
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // Whatever the child left in its group (workers of a local launch) goes too.
  ::kill(-pid, SIGKILL);
  r.wall_s = now_seconds() - start;
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  r.exec_failed = !r.timed_out && !r.interrupted && r.signal == 0 && r.exit_code == kExecFailed;
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
  DLSCALE_ASSERT(!argv.empty());
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  int fds[2];
  DLSCALE_CHECK(::pipe2(fds, O_CLOEXEC) == 0, "cannot create a pipe: {}", std::strerror(errno));
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    throw Error(fmt::format("cannot start '{}': {}", argv[0], std::strerror(errno)));
  }
  if (pid == 0) {
    ::dup2(fds[1], STDOUT_FILENO);
    ::dup2(fds[1], STDERR_FILENO);
    const int null_fd = ::open("/dev/null", O_RDONLY);
    if (null_fd >= 0) ::dup2(null_fd, STDIN_FILENO);
    ::execvp(args[0], args.data());
    const std::string msg = fmt::format("cannot run '{}': {}\n", argv[0], std::strerror(errno));
    [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, msg.data(), msg.size());
    ::_exit(kExecFailed);
  }
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
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace dlscale
