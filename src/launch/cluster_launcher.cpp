#include "launch/cluster_launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <utility>

#include "cluster/cluster.h"
#include "core/child_process.h"
#include "core/line_reader.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "core/subprocess.h"
#include "core/sysinfo.h"
#include "launch/launch_env.h"
#include "launch/local_launcher.h"

namespace dlscale::launch {
namespace {

/// One host's node launcher.
struct NodeProc {
  int host = 0;
  ChildProcess proc;
  LineReader err;            // its (and its workers') stderr, forwarded by us
  std::string error;         // its last "dlscale: error: " line, without the prefix
  FailureCause cause = FailureCause::kUnknown;  // from its "dlscale: cause: " line
  double failed_at = -1;     // when it failed by itself (before we stopped it); -1 = not
  bool running() const { return proc.running(); }
  bool failed() const { return proc.failed(); }
};

/// Whether the command line gives `flag` (as `--flag V` or `--flag=V`).
bool gives_flag(const std::vector<std::string>& argv, const std::string& flag) {
  for (size_t i = 1; i < argv.size(); ++i) {
    if (argv[i] == flag || argv[i].rfind(flag + "=", 0) == 0) return true;
  }
  return false;
}

/// Every host's workers share this machine's cores: unless --threads was
/// given, each worker gets cores / (hosts x workers per host).
void add_default_threads(ClusterPlan& plan, const cluster::ClusterSpec& spec) {
  for (const char* f : {"--threads", "-t", "--threads-per-worker"}) {
    if (gives_flag(plan.argv, f)) return;
  }
  const int threads = std::max(1, available_cores() / (spec.hosts * plan.workers_per_host));
  plan.argv.insert(plan.argv.end(), {"--threads", std::to_string(threads)});
}

/// Starts host `h`'s node launcher inside the host (its network namespace
/// and host name), with its stderr on a pipe we forward.
NodeProc start_node(const ClusterPlan& plan, const cluster::ClusterSpec& spec, int h,
                    const std::string& secret) {
  LinePipe pipe;
  NodeProc n;
  n.host = h;
  SpawnOptions spawn;
  spawn.program = plan.binary;
  spawn.run = plan.run;
  spawn.argv = plan.argv;
  spawn.argv.insert(spawn.argv.end(),
                    {"--nnodes", std::to_string(spec.hosts), "--node-rank", std::to_string(h),
                     "--workers", std::to_string(plan.workers_per_host), "--master-addr",
                     cluster::host_address(0), "--host-addr", cluster::host_address(h)});
  spawn.set_env = {{kEnvJobSecret, secret}, {kEnvCluster, ClusterHost::env_value(spec, h)}};
  spawn.stdin_fd = SpawnOptions::kInherit;
  spawn.stderr_fd = pipe.write_fd;
  const cluster::HostEntry entry = cluster::host_entry(spec.name, h);
  spawn.enter = [entry](const char** what) { return cluster::enter_host(entry, what); };
  spawn.name = fmt::format("host {}", h);
  spawn.error_prefix = "dlscale: error: ";
  try {
    n.proc = ChildProcess(spawn);
  } catch (const Error& e) {
    throw Error(fmt::format("cannot start host {}'s launcher: {}", h, e.what()));
  }
  pipe.close_write();
  n.err = std::move(pipe.reader);
  return n;
}

/// Forwards complete stderr lines to ours, keeping the last error line
/// back: the job's one error line, printed by the caller, names it.
void forward_stderr(NodeProc& n, bool flush) {
  constexpr const char* kPrefix = "dlscale: error: ";
  for (const std::string& line : n.err.read_lines(flush)) {
    if (line.rfind(kCauseLinePrefix, 0) == 0) {
      try {
        n.cause = enum_names(n.cause).parse(line.substr(std::strlen(kCauseLinePrefix)));
      } catch (const Error&) {
        n.cause = FailureCause::kUnknown;  // a launcher of another version: ranked last
      }
      continue;
    }
    if (line.rfind(kPrefix, 0) == 0) {
      n.error = line.substr(std::strlen(kPrefix));
      continue;
    }
    std::fputs((line + "\n").c_str(), stderr);
  }
}

/// SIGTERM (each launcher stops its workers), then SIGKILL after 5 s,
/// forwarding what they print meanwhile.
void stop_nodes(std::vector<NodeProc>& nodes) {
  std::vector<ChildProcess*> procs;
  for (NodeProc& n : nodes) procs.push_back(&n.proc);
  terminate_all(procs, 5.0, [&nodes] {
    for (NodeProc& n : nodes) forward_stderr(n, false);
  });
}

std::string describe_host(const ClusterPlan& plan, int h) {
  const int first = h == 0 ? 0 : plan.servers + h * plan.workers_per_host;
  const int last = plan.servers + (h + 1) * plan.workers_per_host - 1;
  return fmt::format("host {} ({}, rank{} {})", h, cluster::host_address(h),
                     first == last ? "" : "s",
                     first == last ? std::to_string(first) : fmt::format("{}-{}", first, last));
}

std::string describe_failure(const ClusterPlan& plan, const NodeProc& n) {
  if (n.proc.term_signal() != 0) {
    return fmt::format("{}: its launcher {}", describe_host(plan, n.host), n.proc.describe_exit());
  }
  return fmt::format("{}: {}", describe_host(plan, n.host),
                     n.error.empty() ? n.proc.describe_exit() : n.error);
}

/// The cause a host's own launcher cannot see, looked for when the first
/// host fails: a worker stopped (SIGSTOP, a debugger) makes its peers on
/// other hosts stall too, and a link down makes every host stall; the
/// hosts' errors then name whichever rank noticed first.
struct Diagnosis {
  int host = -1;  ///< -1 = nothing found
  std::string what;
};

/// A stopped process whose parent is one of the node launchers.
Diagnosis find_stopped_worker(const std::vector<NodeProc>& nodes) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string pid = e.path().filename();
    if (pid.empty() || !std::isdigit(static_cast<unsigned char>(pid[0]))) continue;
    const std::optional<ProcState> p = proc_state(std::atol(pid.c_str()));
    if (!p || !p->stopped()) continue;
    for (const NodeProc& n : nodes) {
      if (n.proc.pid() != p->ppid) continue;
      std::ifstream in(e.path() / "environ");
      const std::string env((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      const std::string key = std::string(kEnvRank) + "=";
      const size_t at = env.find(key);
      std::string rank = "?";
      if (at != std::string::npos) rank = env.substr(at + key.size(), env.find('\0', at) - at - key.size());
      return {n.host, fmt::format("rank {} is stopped (SIGSTOP or a debugger)", rank)};
    }
  }
  return {};
}

Diagnosis diagnose(const cluster::ClusterSpec& spec, const std::vector<NodeProc>& nodes) {
  Diagnosis d = find_stopped_worker(nodes);
  if (d.host >= 0) return d;
  const std::vector<int> down = cluster::hosts_with_link_down(spec);
  if (!down.empty())
    return {down.front(),
            spec.rack_hosts > 0 ? "its link or its rack's uplink is down" : "its link is down"};
  return d;
}

/// Waits until every host ended, or until `grace` after the first failure;
/// marks when each host failed by itself. Returns whether one did.
bool supervise(const ClusterPlan& plan, const cluster::ClusterSpec& spec,
               const InterruptGuard& interrupts, std::vector<NodeProc>& nodes,
               Diagnosis* diagnosis) {
  double first_at = -1;
  while (true) {
    std::vector<pollfd> fds;
    for (const NodeProc& n : nodes) fds.push_back({n.err.poll_fd(), POLLIN, 0});
    ::poll(fds.data(), fds.size(), 100);
    for (NodeProc& n : nodes) forward_stderr(n, false);
    bool any_running = false;
    for (NodeProc& n : nodes) {
      n.proc.poll();
      any_running = any_running || n.running();
      if (n.failed() && n.failed_at < 0) {
        n.failed_at = now_seconds();
        if (first_at < 0) {
          first_at = n.failed_at;
          *diagnosis = diagnose(spec, nodes);
        }
      }
    }
    if (!any_running || interrupts.signal() != 0) return first_at >= 0;
    if (first_at >= 0 && (now_seconds() - first_at) * 1000 > static_cast<double>(plan.grace.count())) {
      return true;
    }
  }
}

/// How telling a failed host's error is, lower first: its launcher killed
/// by a signal; then its own cause (a rank killed, failed by itself,
/// stopped, silent, gave up on a peer). A host that failed only when we
/// stopped it counts just when its launcher saw a rank killed, failing by
/// itself or stopped. A stopped rank's peers on other hosts stall too, and
/// may fail first; its own host, which names it, wins.
/// Hosts fail in a race (a rank killed on one host resets its peers'
/// connections on the others), so the first to fail is not the cause.
int rank_of(const NodeProc& n) {
  const bool by_itself = n.failed_at >= 0;
  if (by_itself && n.proc.term_signal() != 0) return 0;
  const bool telling = n.cause == FailureCause::kKilled || n.cause == FailureCause::kOwn ||
                       n.cause == FailureCause::kStopped;
  if (!by_itself && !telling) return -1;
  return 1 + static_cast<int>(n.cause);
}

/// The host whose error the job's names: the best rank, then the earliest.
const NodeProc* find_culprit(const std::vector<NodeProc>& nodes) {
  const auto key = [](const NodeProc& p) {
    return std::pair(rank_of(p), p.failed_at < 0 ? std::numeric_limits<double>::max() : p.failed_at);
  };
  const NodeProc* best = nullptr;
  for (const NodeProc& n : nodes) {
    if (!n.failed() || rank_of(n) < 0) continue;
    if (best == nullptr || key(n) < key(*best)) best = &n;
  }
  return best;  // not null when a host failed by itself
}

}  // namespace

void refuse_cluster_set_flags(const std::vector<std::string>& argv) {
  for (const char* flag : {"--workers", "-n", "--nnodes", "--node-rank", "--master-addr",
                           "--host-addr", "--master-bind"}) {
    DLSCALE_CHECK(!gives_flag(argv, flag),
                  "{} cannot be given with --cluster, which starts --workers-per-host workers "
                  "on each host and sets the nodes and addresses itself",
                  flag);
  }
}

void run_cluster_job(const ClusterPlan& given) {
  refuse_cluster_set_flags(given.argv);
  DLSCALE_CHECK(given.workers_per_host >= 1, "--workers-per-host must be at least 1 (got {})",
                given.workers_per_host);
  cluster::check_can_manage();
  const cluster::ClusterSpec spec = cluster::require_cluster(given.cluster);
  ClusterPlan plan = given;
  add_default_threads(plan, spec);
  const char* set = std::getenv(kEnvJobSecret);
  const std::string secret = set != nullptr && *set != '\0' ? set : random_job_secret();
  const InterruptGuard interrupts;
  std::vector<NodeProc> nodes;
  try {
    for (int h = 0; h < spec.hosts; ++h) nodes.push_back(start_node(plan, spec, h, secret));
  } catch (...) {
    stop_nodes(nodes);
    throw;
  }
  DLSCALE_LOG_INFO("cluster '{}' ({}): {} worker(s) per host, rendezvous {}:{}", spec.name,
                   cluster::describe(spec), plan.workers_per_host, cluster::host_address(0),
                   plan.master_port);
  Diagnosis diagnosis;
  const bool failed = supervise(plan, spec, interrupts, nodes, &diagnosis);
  stop_nodes(nodes);
  for (NodeProc& n : nodes) forward_stderr(n, true);
  if (!failed && interrupts.signal() != 0) {
    throw JobFailed(fmt::format("interrupted by signal {}; stopped the job on all {} hosts",
                                interrupts.signal(), spec.hosts),
                    128 + interrupts.signal());
  }
  if (!failed) return;
  const NodeProc& culprit = *find_culprit(nodes);
  std::string others;
  for (const NodeProc& n : nodes) {
    if (n.host != culprit.host && n.failed()) {
      others += fmt::format("{}{}", others.empty() ? "" : ", ", n.host);
    }
  }
  const std::string cause =
      diagnosis.host < 0 ? "" : fmt::format("{}: {}; first error from ", describe_host(plan, diagnosis.host),
                                            diagnosis.what);
  throw JobFailed(fmt::format("{}{}{}; stopped the job on all {} hosts of cluster '{}'", cause,
                              describe_failure(plan, culprit),
                              others.empty() ? "" : "; hosts " + others + " failed too",
                              spec.hosts, spec.name),
                  culprit.proc.term_signal() != 0 ? kExitPeerFailure : culprit.proc.exit_code());
}

}  // namespace dlscale::launch
