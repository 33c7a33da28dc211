#include "launch/local_launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <cstring>
#include <memory>
#include <random>

#include "comm/tcp_store.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/subprocess.h"
#include "launch/launch_env.h"

extern char** environ;

namespace dlscale::launch {
namespace {

/// Whether the kernel shows `pid` stopped (SIGSTOP, a debugger).
bool is_stopped(pid_t pid) {
  const std::optional<ProcState> p = proc_state(pid);
  return p.has_value() && p->stopped();
}

constexpr int kStatusFd = 3;  // workers find their progress pipe here

// Set by SIGINT/SIGTERM while an InterruptGuard lives; signal handlers can
// only communicate through such a flag.
volatile std::sig_atomic_t g_interrupted = 0;
void on_signal(int sig) { g_interrupted = sig; }

struct Child {
  int rank = 0;        // global rank
  pid_t pid = -1;
  int status_fd = -1;  // read end of the progress pipe
  std::string partial;
  std::string last_status = "starting";
  std::string error;   // the worker's own error line, sent instead of printed
  double last_progress = 0;
  bool running = true;
  int exit_code = 0;
  int signal = 0;
  bool failed() const { return !running && (exit_code != 0 || signal != 0); }
};

std::string describe_exit(const Child& c) {
  if (c.signal != 0) {
    const char* name = ::sigabbrev_np(c.signal);
    return fmt::format("was killed by signal {} (SIG{})", c.signal, name ? name : "?");
  }
  return fmt::format("exited with code {}", c.exit_code);
}

void read_status(Child& c, double now) {
  char buf[4096];
  while (true) {
    const ssize_t n = ::read(c.status_fd, buf, sizeof(buf));
    if (n <= 0) break;
    c.partial.append(buf, static_cast<size_t>(n));
  }
  size_t nl;
  while ((nl = c.partial.find('\n')) != std::string::npos) {
    const std::string line = c.partial.substr(0, nl);
    c.partial.erase(0, nl + 1);
    c.last_progress = now;
    if (line.rfind(kStatusErrorPrefix, 0) == 0) {
      c.error = line.substr(std::strlen(kStatusErrorPrefix));
    } else {
      c.last_status = line;
    }
  }
}

void stop_all(std::vector<Child>& children) {
  for (auto& c : children) {
    if (c.running) ::kill(c.pid, SIGTERM);
  }
  const double deadline = now_seconds() + 5.0;
  while (now_seconds() < deadline) {
    bool any = false;
    for (auto& c : children) {
      if (!c.running) continue;
      int st = 0;
      if (::waitpid(c.pid, &st, WNOHANG) == c.pid) {
        c.running = false;
      } else {
        any = true;
      }
    }
    if (!any) return;
    ::usleep(20000);
  }
  for (auto& c : children) {
    if (!c.running) {
      continue;
    }
    ::kill(c.pid, SIGKILL);
    ::waitpid(c.pid, nullptr, 0);
    c.running = false;
  }
}

/// The job's rendezvous secret: DLSCALE_JOB_SECRET when set (every node of
/// a multi-node job must give the same), else a fresh random one for a
/// one-node job; a multi-node job without one runs unauthenticated, warned.
std::string job_secret(const LaunchPlan& plan) {
  if (const char* given = std::getenv(kEnvJobSecret); given != nullptr && *given != '\0') {
    return given;
  }
  if (plan.nnodes > 1) {
    if (plan.node_rank == 0) {
      DLSCALE_LOG_WARN("the rendezvous store admits any client: set {} to the same value on "
                       "every node (docs/launch.md)",
                       kEnvJobSecret);
    }
    return "";
  }
  return random_job_secret();
}

ExecImage prepare_exec(const LaunchPlan& plan, int rank, int local_rank, int local_world,
                       int world, int port, const std::string& secret) {
  return make_exec_image(plan.argv,
                         {{kEnvRank, std::to_string(rank)},
                          {kEnvWorldSize, std::to_string(world)},
                          {kEnvLocalRank, std::to_string(local_rank)},
                          {kEnvLocalWorldSize, std::to_string(local_world)},
                          {kEnvMasterAddr, plan.master_addr},
                          {kEnvMasterPort, std::to_string(port)},
                          {kEnvStatusFd, std::to_string(kStatusFd)},
                          {kEnvJobSecret, secret},
                          {"OMP_NUM_THREADS", std::to_string(plan.threads_per_worker)}});
}

/// A running rank that is the likely cause when others fail or fall
/// silent: one the kernel shows stopped (SIGSTOP, a debugger) first, else
/// the rank silent longest if it has been silent `min_silence` seconds.
/// Progress reports alone race: a rank stopped just after its report looks
/// fresher than the peer that then waits on it.
const Child* find_stalled(const std::vector<Child>& children, double now, double min_silence) {
  const Child* stalled = nullptr;
  for (const auto& c : children) {
    if (!c.running) continue;
    const bool better = stalled == nullptr ||
                        (is_stopped(c.pid) != is_stopped(stalled->pid)
                             ? is_stopped(c.pid)
                             : c.last_progress < stalled->last_progress);
    if (better) stalled = &c;
  }
  if (stalled == nullptr) return nullptr;
  return is_stopped(stalled->pid) || now - stalled->last_progress >= min_silence ? stalled : nullptr;
}

std::string describe_stall(const Child& c, double now) {
  return fmt::format("rank {} stalled: no progress for {:.0f} s while at '{}'{}", c.rank,
                     now - c.last_progress, c.last_status,
                     is_stopped(c.pid) ? " (the process is stopped: SIGSTOP or a debugger)" : "");
}

/// How `c`, which ended, failed: its own error line when it sent one.
std::string describe_failed(const Child& c) {
  if (c.signal == 0 && !c.error.empty()) return fmt::format("rank {}: {}", c.rank, c.error);
  return fmt::format("rank {} {} while at '{}'", c.rank, describe_exit(c), c.last_status);
}

/// Why the job must stop now, or "" if it may go on; sets `exit_code`. One
/// cause is named, the first that applies: ranks killed by a signal; a rank
/// that failed on its own (bad input, an internal error: any exit but a
/// peer failure); a rank stopped or silent while others gave up waiting on
/// it (their peer failures are its consequence); the first rank that failed.
std::string find_failure(const std::vector<Child>& children, double now,
                         std::chrono::milliseconds timeout, int interrupted, int& exit_code) {
  std::string killed;
  const Child* own = nullptr;   // failed by itself
  const Child* peer = nullptr;  // failed because a peer did
  for (const auto& c : children) {
    if (!c.failed()) continue;
    if (c.signal != 0) {
      killed += fmt::format("{}{}", killed.empty() ? "" : "; ", describe_failed(c));
    } else if (c.exit_code == kExitPeerFailure) {
      if (peer == nullptr) peer = &c;
    } else if (own == nullptr) {
      own = &c;
    }
  }
  if (!killed.empty()) {
    exit_code = kExitPeerFailure;
    return killed;
  }
  if (own != nullptr) {
    exit_code = own->exit_code;
    return describe_failed(*own);
  }
  if (peer != nullptr) {
    exit_code = kExitPeerFailure;
    if (const Child* stalled = find_stalled(children, now, 1.0)) {
      return fmt::format("{}; rank {} gave up waiting for it", describe_stall(*stalled, now), peer->rank);
    }
    return describe_failed(*peer);
  }
  if (interrupted != 0) {
    exit_code = 128 + interrupted;
    return fmt::format("interrupted by signal {}", interrupted);
  }
  const double limit = static_cast<double>(timeout.count()) / 1000.0;
  for (const auto& c : children) {
    if (!c.running || now - c.last_progress <= limit) continue;
    // Some rank is over the limit; peers waiting on the cause fall silent
    // too, so the stalled rank is chosen among all running ones.
    const Child* stalled = find_stalled(children, now, 0.0);
    exit_code = kExitPeerFailure;
    return describe_stall(*stalled, now) +
           " (raise --timeout if a step phase legitimately takes longer)";
  }
  return "";
}

}  // namespace

ExecImage make_exec_image(std::vector<std::string> argv,
                          const std::vector<std::pair<std::string, std::string>>& set) {
  ExecImage e;
  e.strings = std::move(argv);
  const size_t nargs = e.strings.size();
  for (char** p = environ; *p != nullptr; ++p) {
    const std::string kv = *p;
    const std::string key = kv.substr(0, kv.find('='));
    bool replaced = false;
    for (const auto& [name, value] : set) replaced = replaced || key == name;
    if (!replaced) e.strings.push_back(kv);
  }
  for (const auto& [name, value] : set) e.strings.push_back(name + "=" + value);
  for (size_t i = 0; i < e.strings.size(); ++i) {
    (i < nargs ? e.argv : e.envp).push_back(e.strings[i].data());
  }
  e.argv.push_back(nullptr);
  e.envp.push_back(nullptr);
  return e;
}

InterruptGuard::InterruptGuard() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  g_interrupted = 0;
  ::sigaction(SIGINT, &sa, &old_int_);
  ::sigaction(SIGTERM, &sa, &old_term_);
}

InterruptGuard::~InterruptGuard() {
  ::sigaction(SIGINT, &old_int_, nullptr);
  ::sigaction(SIGTERM, &old_term_, nullptr);
}

int InterruptGuard::signal() const { return g_interrupted; }

void become_child_of(pid_t parent) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(1);
  ::signal(SIGINT, SIG_DFL);
  ::signal(SIGTERM, SIG_DFL);
}

std::string random_job_secret() {
  std::random_device rd;
  std::string secret;
  for (int i = 0; i < 4; ++i) secret += fmt::format("{:08x}", rd());
  return secret;
}

void StatusWriter::write(const std::string& status) const {
  if (fd_ < 0) return;
  const std::string line = status + "\n";
  // O_NONBLOCK is set on the write end by the launcher; a full pipe drops the line.
  [[maybe_unused]] const ssize_t n = ::write(fd_, line.data(), line.size());
}

bool StatusWriter::write_error(const std::string& message) const {
  if (fd_ < 0) return false;
  const std::string line = kStatusErrorPrefix + message + "\n";
  // The one line that must arrive: a full pipe is waited on (the launcher
  // drains it every 200 ms) for up to 2 s.
  for (int tries = 0; tries < 100; ++tries) {
    const ssize_t n = ::write(fd_, line.data(), line.size());
    if (n == static_cast<ssize_t>(line.size())) return true;
    if (n >= 0 || (errno != EAGAIN && errno != EINTR)) return false;
    ::usleep(20000);
  }
  return false;
}

void run_local_workers(const LaunchPlan& plan) {
  // Servers (dedicated parameter-server shards) are the first ranks, on node 0.
  const int world = plan.servers + plan.workers * plan.nnodes;
  const int local_world = plan.workers + (plan.node_rank == 0 ? plan.servers : 0);
  const int first_rank = plan.node_rank == 0 ? 0 : plan.servers + plan.node_rank * plan.workers;
  std::unique_ptr<comm::TcpStoreServer> store;
  int port = plan.master_port;
  const std::string secret = job_secret(plan);
  if (plan.node_rank == 0) {
    store = std::make_unique<comm::TcpStoreServer>(
        plan.master_bind.empty() ? plan.master_addr : plan.master_bind,
        static_cast<uint16_t>(port), secret);
    port = store->port();
  }
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  ::sched_getaffinity(0, sizeof(allowed), &allowed);
  std::vector<int> cores;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &allowed)) cores.push_back(c);
  }

  const InterruptGuard interrupts;

  const int devnull = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  const pid_t parent = ::getpid();
  std::vector<Child> children;
  const double start = now_seconds();
  for (int local = 0; local < local_world; ++local) {
    Child c;
    c.rank = first_rank + local;
    c.last_progress = start;
    int fds[2];
    DLSCALE_CHECK(::pipe2(fds, O_CLOEXEC) == 0, "cannot create a pipe: {}", std::strerror(errno));
    ::fcntl(fds[0], F_SETFL, O_NONBLOCK);
    ::fcntl(fds[1], F_SETFL, O_NONBLOCK);
    ExecImage exec = prepare_exec(plan, c.rank, local, local_world, world, port, secret);
    cpu_set_t pin;
    CPU_ZERO(&pin);
    for (int t = 0; t < plan.threads_per_worker && !cores.empty(); ++t) {
      CPU_SET(cores[(local * plan.threads_per_worker + t) % cores.size()], &pin);
    }
    const bool quiet = c.rank != plan.servers && !plan.verbose_ranks;  // the first worker prints
    const pid_t pid = ::fork();
    if (pid == 0) {
      become_child_of(parent);
      ::dup2(fds[1], kStatusFd);
      if (quiet) ::dup2(devnull, STDOUT_FILENO);
      if (plan.bind_cores) ::sched_setaffinity(0, sizeof(pin), &pin);
      ::execve(plan.binary.c_str(), exec.argv.data(), exec.envp.data());
      ::_exit(127);
    }
    ::close(fds[1]);
    if (pid < 0) {
      ::close(fds[0]);
      stop_all(children);
      throw Error(fmt::format("cannot start worker {}: {}", c.rank, std::strerror(errno)));
    }
    c.pid = pid;
    c.status_fd = fds[0];
    children.push_back(std::move(c));
  }
  ::close(devnull);
  DLSCALE_LOG_INFO("started {} worker(s){} on this node (ranks {}-{} of {}), rendezvous {}:{}",
                   plan.workers,
                   plan.node_rank == 0 && plan.servers > 0
                       ? fmt::format(" and {} server(s) (ranks 0-{})", plan.servers, plan.servers - 1)
                       : std::string(),
                   children.front().rank, children.back().rank, world,
                   plan.master_addr, port);

  std::string failure;
  int exit_code = 0;
  while (true) {
    std::vector<pollfd> fds;
    for (const auto& c : children) fds.push_back({c.status_fd, POLLIN, 0});
    ::poll(fds.data(), fds.size(), 200);
    const double now = now_seconds();
    for (auto& c : children) read_status(c, now);
    int st = 0;
    pid_t pid;
    while ((pid = ::waitpid(-1, &st, WNOHANG)) > 0) {
      for (auto& c : children) {
        if (c.pid != pid) continue;
        read_status(c, now);
        c.running = false;
        if (WIFEXITED(st)) c.exit_code = WEXITSTATUS(st);
        if (WIFSIGNALED(st)) c.signal = WTERMSIG(st);
      }
    }
    if (failure.empty()) failure = find_failure(children, now, plan.timeout, interrupts.signal(), exit_code);
    bool any_running = false;
    for (const auto& c : children) any_running = any_running || c.running;
    if (!failure.empty() || !any_running) break;
  }
  stop_all(children);
  for (auto& c : children) ::close(c.status_fd);
  if (!failure.empty()) {
    const auto servers = static_cast<int>(std::count_if(
        children.begin(), children.end(), [&](const Child& c) { return c.rank < plan.servers; }));
    const int workers = static_cast<int>(children.size()) - servers;
    throw JobFailed(fmt::format("{}; stopped all {} worker(s){}", failure, workers,
                                servers > 0 ? fmt::format(" and {} server(s)", servers) : ""),
                    exit_code);
  }
}

}  // namespace dlscale::launch
