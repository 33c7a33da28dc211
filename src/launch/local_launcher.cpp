#include "launch/local_launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
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
#include "core/child_process.h"
#include "core/line_reader.h"
#include "core/subprocess.h"
#include "launch/launch_env.h"

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

/// A worker process and what the launcher knows of it.
struct Child {
  int rank = 0;          // global rank
  ChildProcess proc;
  LineReader status;     // the read end of the progress pipe
  std::string last_status = "starting";
  std::string error;     // the worker's own error line, sent instead of printed
  double last_progress = 0;
  bool running() const { return proc.running(); }
  bool failed() const { return proc.failed(); }
};

void read_status(Child& c, double now) {
  for (const std::string& line : c.status.read_lines()) {
    c.last_progress = now;
    if (line.rfind(kStatusErrorPrefix, 0) == 0) {
      c.error = line.substr(std::strlen(kStatusErrorPrefix));
    } else {
      c.last_status = line;
    }
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

/// What worker `rank` is told through its environment.
std::vector<std::pair<std::string, std::string>> worker_env(const LaunchPlan& plan, int rank,
                                                            int local_rank, int local_world,
                                                            int world, int port,
                                                            const std::string& secret) {
  return {{kEnvRank, std::to_string(rank)},
          {kEnvWorldSize, std::to_string(world)},
          {kEnvLocalRank, std::to_string(local_rank)},
          {kEnvLocalWorldSize, std::to_string(local_world)},
          {kEnvMasterAddr, plan.master_addr},
          {kEnvMasterPort, std::to_string(port)},
          {kEnvStatusFd, std::to_string(kStatusFd)},
          {kEnvJobSecret, secret},
          {"OMP_NUM_THREADS", std::to_string(plan.threads_per_worker)}};
}

/// A running rank that is the likely cause when others fail or fall
/// silent: one the kernel shows stopped (SIGSTOP, a debugger) first, else
/// the rank silent longest if it has been silent `min_silence` seconds.
/// Progress reports alone race: a rank stopped just after its report looks
/// fresher than the peer that then waits on it.
const Child* find_stalled(const std::vector<Child>& children, double now, double min_silence) {
  const Child* stalled = nullptr;
  for (const auto& c : children) {
    if (!c.running()) continue;
    const bool better = stalled == nullptr ||
                        (is_stopped(c.proc.pid()) != is_stopped(stalled->proc.pid())
                             ? is_stopped(c.proc.pid())
                             : c.last_progress < stalled->last_progress);
    if (better) stalled = &c;
  }
  if (stalled == nullptr) return nullptr;
  return is_stopped(stalled->proc.pid()) || now - stalled->last_progress >= min_silence ? stalled
                                                                                        : nullptr;
}

/// A rank the kernel shows stopped is a cause of its own, more telling than
/// one merely silent (the cluster launcher ranks the hosts' causes).
FailureCause stall_cause(const Child& c) {
  return is_stopped(c.proc.pid()) ? FailureCause::kStopped : FailureCause::kStalled;
}

/// `c`'s stall as `cause` (stall_cause) says it: a stopped rank is named as
/// the cluster launcher names it ("rank N is stopped"), whichever of them
/// notices first.
std::string describe_stall(const Child& c, double now, FailureCause cause) {
  return fmt::format(
      "rank {} {}: no progress for {:.0f} s while at '{}'", c.rank,
      cause == FailureCause::kStopped ? "is stopped (SIGSTOP or a debugger)" : "stalled",
      now - c.last_progress, c.last_status);
}

/// How `c`, which ended, failed: its own error line when it sent one.
std::string describe_failed(const Child& c) {
  if (c.proc.term_signal() == 0 && !c.error.empty()) return fmt::format("rank {}: {}", c.rank, c.error);
  return fmt::format("rank {} {} while at '{}'", c.rank, c.proc.describe_exit(), c.last_status);
}

/// Why the job must stop now, or "" if it may go on; sets `exit_code`. One
/// cause is named, the first that applies: ranks killed by a signal; a rank
/// that failed on its own (bad input, an internal error: any exit but a
/// peer failure); a rank stopped or silent while others gave up waiting on
/// it (their peer failures are its consequence); the first rank that failed.
std::string find_failure(const std::vector<Child>& children, double now,
                         std::chrono::milliseconds timeout, int interrupted, int& exit_code,
                         FailureCause& cause) {
  std::string killed;
  const Child* own = nullptr;   // failed by itself
  const Child* peer = nullptr;  // failed because a peer did
  for (const auto& c : children) {
    if (!c.failed()) continue;
    if (c.proc.term_signal() != 0) {
      killed += fmt::format("{}{}", killed.empty() ? "" : "; ", describe_failed(c));
    } else if (c.proc.exit_code() == kExitPeerFailure) {
      if (peer == nullptr) peer = &c;
    } else if (own == nullptr) {
      own = &c;
    }
  }
  if (!killed.empty()) {
    exit_code = kExitPeerFailure;
    cause = FailureCause::kKilled;
    return killed;
  }
  if (own != nullptr) {
    exit_code = own->proc.exit_code();
    cause = FailureCause::kOwn;
    return describe_failed(*own);
  }
  if (peer != nullptr) {
    exit_code = kExitPeerFailure;
    if (const Child* stalled = find_stalled(children, now, 1.0)) {
      cause = stall_cause(*stalled);
      return fmt::format("{}; rank {} gave up waiting for it", describe_stall(*stalled, now, cause),
                         peer->rank);
    }
    cause = FailureCause::kPeer;
    return describe_failed(*peer);
  }
  if (interrupted != 0) {
    exit_code = 128 + interrupted;
    cause = FailureCause::kInterrupted;
    return fmt::format("interrupted by signal {}", interrupted);
  }
  const double limit = static_cast<double>(timeout.count()) / 1000.0;
  for (const auto& c : children) {
    if (!c.running() || now - c.last_progress <= limit) continue;
    // Some rank is over the limit; peers waiting on the cause fall silent
    // too, so the stalled rank is chosen among all running ones.
    const Child* stalled = find_stalled(children, now, 0.0);
    exit_code = kExitPeerFailure;
    cause = stall_cause(*stalled);
    return describe_stall(*stalled, now, cause) +
           " (raise --timeout if a step phase legitimately takes longer)";
  }
  return "";
}

constexpr EnumNames<FailureCause, 6> kFailureCauses{
    "failure cause",
    {{{FailureCause::kKilled, "killed"},
      {FailureCause::kOwn, "own"},
      {FailureCause::kStopped, "stopped"},
      {FailureCause::kStalled, "stalled"},
      {FailureCause::kPeer, "peer"},
      {FailureCause::kInterrupted, "interrupted"}}}};

}  // namespace

const EnumNames<FailureCause, 6>& enum_names(FailureCause) { return kFailureCauses; }

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

namespace {

/// The CPUs this process may use, in order (for --bind-cores).
std::vector<int> allowed_cores() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  ::sched_getaffinity(0, sizeof(allowed), &allowed);
  std::vector<int> cores;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &allowed)) cores.push_back(c);
  }
  return cores;
}

/// Starts this node's ranks: servers (node 0 only) first, then workers.
std::vector<Child> start_children(const LaunchPlan& plan, int port, const std::string& secret) {
  const int world = plan.servers + plan.workers * plan.nnodes;
  const int local_world = plan.workers + (plan.node_rank == 0 ? plan.servers : 0);
  const int first_rank = plan.node_rank == 0 ? 0 : plan.servers + plan.node_rank * plan.workers;
  const std::vector<int> cores = allowed_cores();
  std::vector<Child> children;
  const double start = now_seconds();
  for (int local = 0; local < local_world; ++local) {
    Child c;
    c.rank = first_rank + local;
    c.last_progress = start;
    LinePipe pipe(/*nonblocking_write=*/true);  // a worker drops a status line rather than wait
    SpawnOptions spawn;
    spawn.program = plan.binary;
    spawn.run = plan.run;
    spawn.argv = plan.argv;
    spawn.set_env = worker_env(plan, c.rank, local, local_world, world, port, secret);
    spawn.stdin_fd = SpawnOptions::kInherit;
    spawn.pass_fds = {{pipe.write_fd, kStatusFd}};
    // Only the first worker prints (after the servers), unless --verbose-ranks.
    if (c.rank != plan.servers && !plan.verbose_ranks) spawn.stdout_fd = SpawnOptions::kDevNull;
    for (int t = 0; plan.bind_cores && t < plan.threads_per_worker && !cores.empty(); ++t) {
      spawn.cpus.push_back(cores[(local * plan.threads_per_worker + t) % cores.size()]);
    }
    try {
      c.proc = ChildProcess(spawn);
    } catch (const Error& e) {
      throw Error(fmt::format("cannot start worker {}: {}", c.rank, e.what()));
    }
    pipe.close_write();
    c.status = std::move(pipe.reader);
    children.push_back(std::move(c));
  }
  DLSCALE_LOG_INFO(
      "started {} worker(s){} on this node (ranks {}-{} of {}, {}), rendezvous {}:{}", plan.workers,
      plan.node_rank == 0 && plan.servers > 0
          ? fmt::format(" and {} server(s) (ranks 0-{})", plan.servers, plan.servers - 1)
          : std::string(),
      children.front().rank, children.back().rank, world,
      plan.run != nullptr ? "forks of this process" : "executed", plan.master_addr, port);
  return children;
}

/// How long a worker's peer failure waits for another worker of this node
/// to end with its own error, which is then the cause named: a peer failure
/// is usually the echo of one (another node's launcher gone with its store
/// after a rank there refused the job, say).
constexpr double kPeerEchoGraceSeconds = 2.0;

/// Watches the workers' progress and exits until they all ended or one
/// failed; returns why the job failed ("" if it did not), and its exit code.
std::string supervise(std::vector<Child>& children, const LaunchPlan& plan,
                      const InterruptGuard& interrupts, int& exit_code, FailureCause& cause) {
  double grace_end = -1;  // set when a peer failure is seen while others run
  while (true) {
    std::vector<pollfd> fds;
    for (const auto& c : children) fds.push_back({c.status.poll_fd(), POLLIN, 0});
    ::poll(fds.data(), fds.size(), 200);
    const double now = now_seconds();
    bool any_running = false;
    for (auto& c : children) {
      c.proc.poll();
      read_status(c, now);  // after the poll: an ended worker's last lines are in
      any_running = any_running || c.running();
    }
    const std::string failure = find_failure(children, now, plan.timeout, interrupts.signal(), exit_code, cause);
    if (!failure.empty() && cause == FailureCause::kPeer && any_running) {
      if (grace_end < 0) grace_end = now + kPeerEchoGraceSeconds;
      if (now < grace_end) continue;
    }
    if (!failure.empty() || !any_running) return failure;
  }
}

}  // namespace

void run_local_workers(const LaunchPlan& plan) {
  std::unique_ptr<comm::TcpStoreServer> store;
  int port = plan.master_port;
  const std::string secret = job_secret(plan);
  if (plan.node_rank == 0) {
    store = std::make_unique<comm::TcpStoreServer>(
        plan.master_bind.empty() ? plan.master_addr : plan.master_bind, static_cast<uint16_t>(port),
        secret, /*serve_now=*/false);
    port = store->port();
  }
  const InterruptGuard interrupts;
  // A worker that fails to start stops those started before it (their
  // destructors). The store serves once all are started: until then this
  // process has no other thread (workers may be its forks).
  std::vector<Child> children = start_children(plan, port, secret);
  if (store) store->serve();
  int exit_code = 0;
  FailureCause cause = FailureCause::kUnknown;
  const std::string failure = supervise(children, plan, interrupts, exit_code, cause);
  std::vector<ChildProcess*> procs;
  for (auto& c : children) procs.push_back(&c.proc);
  terminate_all(procs, 5.0);
  if (failure.empty()) return;
  const auto servers = static_cast<int>(std::count_if(
      children.begin(), children.end(), [&](const Child& c) { return c.rank < plan.servers; }));
  const int workers = static_cast<int>(children.size()) - servers;
  throw JobFailed(fmt::format("{}; stopped all {} worker(s){}", failure, workers,
                              servers > 0 ? fmt::format(" and {} server(s)", servers) : ""),
                  exit_code, cause);
}

}  // namespace dlscale::launch
