#include "core/child_process.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <thread>

#include "core/clock.h"
#include "core/error.h"

extern char** environ;

namespace dlscale {
namespace {

/// What exec needs, built before fork: the child only reads it.
struct Prepared {
  std::vector<std::string> strings;  // own what argv and envp point to
  std::vector<char*> argv;
  std::vector<char*> envp;           // empty: this process's environment
  std::string program;
  bool search_path = false;
  std::string exec_head;   // "<prefix>cannot run 'X': "
  std::string enter_head;  // "<prefix><name>: cannot "
  cpu_set_t cpus{};
};

Prepared prepare(const SpawnOptions& o) {
  DLSCALE_ASSERT(!o.argv.empty());
  Prepared p;
  p.strings = o.argv;
  const size_t nargs = p.strings.size();
  if (!o.set_env.empty()) {
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string kv = *e;
      const std::string key = kv.substr(0, kv.find('='));
      bool replaced = false;
      for (const auto& [name, value] : o.set_env) replaced = replaced || key == name;
      if (!replaced) p.strings.push_back(kv);
    }
    for (const auto& [name, value] : o.set_env) p.strings.push_back(name + "=" + value);
  }
  for (size_t i = 0; i < p.strings.size(); ++i) {
    (i < nargs ? p.argv : p.envp).push_back(p.strings[i].data());
  }
  p.argv.push_back(nullptr);
  if (!o.set_env.empty()) p.envp.push_back(nullptr);
  p.program = o.program.empty() ? o.argv[0] : o.program;
  p.search_path = o.program.empty() && o.argv[0].find('/') == std::string::npos;
  p.exec_head = fmt::format("{}cannot run '{}': ", o.error_prefix, p.program);
  p.enter_head = fmt::format("{}{}: cannot ", o.error_prefix, o.name);
  CPU_ZERO(&p.cpus);
  for (int c : o.cpus) CPU_SET(c, &p.cpus);
  return p;
}

void put(const char* s) { [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, s, std::strlen(s)); }

/// In the child: says why on stderr and exits (no allocation after fork).
[[noreturn]] void child_fail(const std::string& head, const char* what, int err, int code) {
  put(head.c_str());
  if (what != nullptr) {
    put(what);
    put(": ");
  }
  put(std::strerror(err));
  put("\n");
  ::_exit(code);
}

void redirect(int target, int fd, int null_mode) {
  if (fd == SpawnOptions::kInherit) return;
  if (fd == SpawnOptions::kDevNull) {
    const int null_fd = ::open("/dev/null", null_mode);
    if (null_fd >= 0 && null_fd != target) ::dup2(null_fd, target);
    return;
  }
  ::dup2(fd, target);
}

/// In the child: closes what exec would, the descriptors marked close-on-exec.
void close_on_exec_descriptors() {
  std::vector<int> marked;
  if (DIR* dir = ::opendir("/proc/self/fd")) {
    const int own = ::dirfd(dir);
    while (const dirent* e = ::readdir(dir)) {
      const int fd = std::atoi(e->d_name);
      if (fd > STDERR_FILENO && fd != own && (::fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0)
        marked.push_back(fd);
    }
    ::closedir(dir);
  }
  for (const int fd : marked) ::close(fd);
}

/// In the child, instead of exec: runs o.run as exec would have started the
/// program, then exits with its code as returning from main would, its
/// output flushed, but without the static destructors and exit handlers of
/// the process it was forked from: those belong to that process (a test
/// binary's, removing its files at exit) and would run in every child.
[[noreturn]] void run_instead_of_exec(const SpawnOptions& o, const Prepared& p) {
  close_on_exec_descriptors();
  if (!p.envp.empty()) environ = const_cast<char**>(p.envp.data());
  int code = 1;
  try {
    code = o.run(static_cast<int>(p.argv.size()) - 1, const_cast<char**>(p.argv.data()));
  } catch (...) {
    put("internal error: an exception escaped a forked child's entry\n");
  }
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  ::_exit(code);
}

[[noreturn]] void run_child(const SpawnOptions& o, const Prepared& p, pid_t parent) {
  if (o.die_with_parent) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(kExitExecFailed);
  }
  ::signal(SIGINT, SIG_DFL);
  ::signal(SIGTERM, SIG_DFL);
  if (o.own_group) ::setpgid(0, 0);
  redirect(STDIN_FILENO, o.stdin_fd, O_RDONLY);
  redirect(STDOUT_FILENO, o.stdout_fd, O_WRONLY);
  redirect(STDERR_FILENO, o.stderr_fd, O_WRONLY);
  for (const auto& [from, to] : o.pass_fds) {
    if (from == to) {
      ::fcntl(to, F_SETFD, 0);  // dup2 onto itself would keep close-on-exec
    } else {
      ::dup2(from, to);
    }
  }
  if (!o.cpus.empty()) ::sched_setaffinity(0, sizeof(p.cpus), &p.cpus);
  if (o.enter) {
    const char* what = "";
    if (const int err = o.enter(&what); err != 0) child_fail(p.enter_head, what, err, 2);
  }
  if (o.run != nullptr) run_instead_of_exec(o, p);
  char* const* envp = p.envp.empty() ? environ : p.envp.data();
  if (p.search_path) {
    ::execvpe(p.program.c_str(), p.argv.data(), envp);
  } else {
    ::execve(p.program.c_str(), p.argv.data(), envp);
  }
  child_fail(p.exec_head, nullptr, errno, kExitExecFailed);
}

}  // namespace

ChildProcess::ChildProcess(const SpawnOptions& o) : own_group_(o.own_group) {
  const Prepared p = prepare(o);
  const pid_t parent = ::getpid();
  if (o.run != nullptr) std::fflush(nullptr);  // else the child writes what is buffered here again
  pid_ = ::fork();
  if (pid_ == 0) run_child(o, p, parent);
  if (pid_ < 0) {
    const int err = errno;
    pid_ = -1;
    throw Error(fmt::format("cannot start '{}': {}", p.program, std::strerror(err)));
  }
  if (own_group_) ::setpgid(pid_, pid_);  // also here, so that signal() works at once
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : pid_(other.pid_),
      own_group_(other.own_group_),
      ended_(other.ended_),
      exit_code_(other.exit_code_),
      term_signal_(other.term_signal_) {
  other.pid_ = -1;
}

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  if (this != &other) {
    this->~ChildProcess();
    pid_ = other.pid_;
    own_group_ = other.own_group_;
    ended_ = other.ended_;
    exit_code_ = other.exit_code_;
    term_signal_ = other.term_signal_;
    other.pid_ = -1;
  }
  return *this;
}

pid_t ChildProcess::release() {
  const pid_t pid = pid_;
  pid_ = -1;
  return pid;
}

ChildProcess::~ChildProcess() {
  if (!running()) return;
  signal(SIGKILL);
  wait();
}

void ChildProcess::record(int status) {
  ended_ = true;
  if (WIFEXITED(status)) exit_code_ = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) term_signal_ = WTERMSIG(status);
}

bool ChildProcess::poll() {
  if (!running()) return true;
  int status = 0;
  const pid_t done = ::waitpid(pid_, &status, WNOHANG);
  if (done == pid_) record(status);
  if (done < 0 && errno == ECHILD) ended_ = true;  // reaped elsewhere: its status is lost
  return ended_;
}

void ChildProcess::wait() {
  while (running()) {
    int status = 0;
    const pid_t done = ::waitpid(pid_, &status, 0);
    if (done == pid_) record(status);
    if (done < 0 && errno != EINTR) ended_ = true;
  }
}

void ChildProcess::signal(int sig) const {
  if (pid_ <= 0) return;
  if (own_group_) {
    ::kill(-pid_, sig);
  } else if (!ended_) {  // an ended pid may be another process's by now
    ::kill(pid_, sig);
  }
}

void ChildProcess::terminate(double grace_s) { terminate_all({this}, grace_s); }

std::string ChildProcess::describe_exit() const {
  if (term_signal_ != 0) {
    const char* name = ::sigabbrev_np(term_signal_);
    return fmt::format("was killed by signal {} (SIG{})", term_signal_, name ? name : "?");
  }
  return fmt::format("exited with code {}", exit_code_);
}

void terminate_all(const std::vector<ChildProcess*>& children, double grace_s,
                   const std::function<void()>& while_waiting) {
  // A stopped child (SIGSTOP, a shell's Ctrl-Z) holds SIGTERM pending until
  // it runs again: continued, it ends now instead of at the SIGKILL after
  // the grace. One stopped by a debugger (ptrace) stays stopped and gets the
  // SIGKILL.
  for (ChildProcess* c : children) {
    if (!c->running()) continue;
    c->signal(SIGTERM);
    c->signal(SIGCONT);
  }
  const double deadline = now_seconds() + grace_s;
  while (true) {
    bool any = false;
    for (ChildProcess* c : children) any = !c->poll() || any;  // poll() is true once ended
    if (while_waiting) while_waiting();
    if (!any || now_seconds() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (ChildProcess* c : children) {
    if (!c->running()) continue;
    c->signal(SIGKILL);
    c->wait();
  }
}

namespace {
std::string& self_executable_override() {
  static std::string path;
  return path;
}
}  // namespace

std::string self_executable() {
  const std::string& path = self_executable_override();
  return path.empty() ? std::string("/proc/self/exe") : path;
}

void set_self_executable(std::string path) { self_executable_override() = std::move(path); }

}  // namespace dlscale
