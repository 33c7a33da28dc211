#include "slurm/slurm_cluster.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "core/clock.h"
#include "core/error.h"
#include "core/files.h"
#include "core/subprocess.h"
#include "core/sysinfo.h"

namespace dlscale::slurm {
namespace {

namespace fs = std::filesystem;

constexpr double kDaemonStartS = 15;     // munged's socket, a daemon's first seconds
constexpr double kRegisterBaseS = 60;    // every slurmd idle in slurmctld's view
constexpr double kRegisterPerHostS = 1;

std::string path_in(const std::string& cluster, const std::string& name) {
  return slurm_dir(cluster) + "/" + name;
}

/// The last non-empty line of a log file, or "(its log is empty)".
std::string last_log_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::string last;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
  }
  return last.empty() ? fmt::format("(its log {} is empty)", path) : last;
}

/// A child of host `host`'s namespaces, with the cluster's Slurm config.
SpawnOptions on_host(const std::string& cluster, int host, std::vector<std::string> argv) {
  SpawnOptions s;
  s.argv = std::move(argv);
  s.set_env = {{"SLURM_CONF", slurm_conf_path(cluster)}};
  s.die_with_parent = false;
  const auto entry = std::make_shared<cluster::HostEntry>(cluster::host_entry(cluster, host));
  s.enter = [entry](const char** what) { return cluster::enter_host(*entry, what); };
  s.name = fmt::format("host {}", host);
  s.error_prefix = "dlscale: error: ";
  return s;
}

/// A daemon in the foreground in its own process group, its output in `out`.
struct Daemon {
  std::string name;     ///< "slurmd on host 1"
  std::string out;      ///< its stdout and stderr
  std::string own_log;  ///< the log file it writes itself
  ChildProcess child;
};

Daemon start_daemon(const std::string& cluster, int host, const std::string& name, std::vector<std::string> argv) {
  Daemon d;
  d.name = fmt::format("{} on host {}", name, host);
  const std::string stem = name == "slurmd" ? "slurmd-" + cluster::host_name(cluster, host) : name;
  d.out = path_in(cluster, "log/" + stem + ".out");
  d.own_log = path_in(cluster, "log/" + stem + ".log");
  const int fd = ::open(d.out.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  DLSCALE_CHECK(fd >= 0, "cannot create '{}': {}", d.out, std::strerror(errno));
  SpawnOptions s = on_host(cluster, host, std::move(argv));
  s.stdout_fd = fd;
  s.stderr_fd = fd;
  s.own_group = true;  // Ctrl-C at the terminal that ran `up` must not reach it
  try {
    d.child = ChildProcess(s);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  return d;
}

/// Throws naming the first daemon that has ended, with its output's last
/// line (or its own log's, when it printed nothing).
void check_alive(std::vector<Daemon>& daemons) {
  for (Daemon& d : daemons) {
    if (!d.child.poll()) continue;
    std::string line = last_log_line(d.out);
    if (std::error_code ec; line.rfind("(its log", 0) == 0 && fs::exists(d.own_log, ec)) {
      line = last_log_line(d.own_log);
    }
    throw Error(fmt::format("Slurm: {} {} at start: {}", d.name, d.child.describe_exit(), line));
  }
}

/// sinfo's view from host 0: node name -> state ("idle", "down*", ...).
std::vector<std::pair<std::string, std::string>> node_states(const std::string& cluster) {
  std::string out;
  if (run_captured(on_host(cluster, 0, {"sinfo", "-h", "-N", "-o", "%N %t"}), &out) != 0) return {};
  std::vector<std::pair<std::string, std::string>> states;
  std::istringstream in(out);
  std::string node;
  std::string state;
  while (in >> node >> state) states.emplace_back(node, state);
  return states;
}

void wait_for_socket(std::vector<Daemon>& daemons, const std::string& socket, const std::string& log_dir) {
  const double deadline = now_seconds() + kDaemonStartS;
  for (std::error_code ec; !fs::exists(socket, ec); ec.clear()) {
    check_alive(daemons);
    DLSCALE_CHECK(now_seconds() < deadline, "Slurm: munged did not create its socket {} within {:g} s: {}",
                  socket, kDaemonStartS, last_log_line(log_dir + "/munged.log"));
    ::usleep(20000);
  }
}

void wait_for_nodes(std::vector<Daemon>& daemons, const cluster::ClusterSpec& spec, const std::string& log_dir) {
  const double timeout = kRegisterBaseS + kRegisterPerHostS * spec.hosts;
  const double deadline = now_seconds() + timeout;
  while (true) {
    check_alive(daemons);
    std::vector<std::string> missing;
    const auto states = node_states(spec.name);
    for (int h = 0; h < spec.hosts; ++h) {
      const std::string node = cluster::host_name(spec.name, h);
      bool idle = false;
      for (const auto& [n, st] : states) idle = idle || (n == node && st == "idle");
      if (!idle) missing.push_back(node);
    }
    if (missing.empty()) return;
    if (now_seconds() >= deadline) {
      std::string names;
      for (const std::string& n : missing) names += (names.empty() ? "" : ", ") + n;
      throw Error(fmt::format("Slurm: node(s) {} did not register as idle within {:g} s; slurmctld's log "
                              "ends: {}",
                              names, timeout, last_log_line(log_dir + "/slurmctld.log")));
    }
    ::usleep(200000);
  }
}

/// munge's key: 1 KiB from the kernel's generator, readable by root only.
void write_munge_key(const std::string& path) {
  std::string key(1024, '\0');
  std::ifstream rnd("/dev/urandom", std::ios::binary);
  rnd.read(key.data(), static_cast<std::streamsize>(key.size()));
  DLSCALE_CHECK(rnd.gcount() == static_cast<std::streamsize>(key.size()), "cannot read /dev/urandom");
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0400);
  DLSCALE_CHECK(fd >= 0, "cannot create '{}': {}", path, std::strerror(errno));
  const ssize_t n = ::write(fd, key.data(), key.size());
  ::close(fd);
  DLSCALE_CHECK(n == static_cast<ssize_t>(key.size()), "cannot write '{}'", path);
}

/// The directory tree: munge wants its socket's directory open to all and
/// its key's to root only.
void make_tree(const cluster::ClusterSpec& spec) {
  const std::string dir = slurm_dir(spec.name);
  remove_slurm_files(spec.name);
  for (const char* sub : {"", "/munge", "/key", "/state", "/log", "/spool", "/tmp"}) {
    std::error_code ec;
    fs::create_directories(dir + sub, ec);
    DLSCALE_CHECK(!ec, "cannot create '{}{}': {}", dir, sub, ec.message());
  }
  // munged checks every directory above its socket: open to all, whatever
  // the umask that made them.
  for (const fs::path& above : {fs::path(dir).parent_path().parent_path(), fs::path(dir).parent_path()}) {
    std::error_code ec;
    fs::permissions(above, fs::perms(0755), ec);
  }
  fs::permissions(dir, fs::perms(0755));
  fs::permissions(dir + "/munge", fs::perms(0755));
  fs::permissions(dir + "/key", fs::perms(0700));
  for (int h = 0; h < spec.hosts; ++h) {
    fs::create_directories(dir + "/spool/" + cluster::host_name(spec.name, h));
    fs::create_directories(dir + "/tmp/" + cluster::host_name(spec.name, h));
  }
  write_munge_key(dir + "/key/munge.key");
  write_file_atomic(slurm_conf_path(spec.name), slurm_conf(spec, dir));
}

}  // namespace

std::string slurm_dir(const std::string& cluster) { return cluster::cluster_service_dir(cluster, "slurm"); }

std::string slurm_conf_path(const std::string& cluster) { return path_in(cluster, "slurm.conf"); }

void check_slurm_installed() {
  std::string out;
  for (const auto& [tool, package] : {std::pair<const char*, const char*>{"munged", "munge"},
                                      {"slurmctld", "slurmctld"},
                                      {"slurmd", "slurmd"},
                                      {"sinfo", "slurm-client"},
                                      {"srun", "slurm-client"},
                                      {"sbatch", "slurm-client"}}) {
    DLSCALE_CHECK(run_captured({tool, "-V"}, &out) != kExitExecFailed,
                  "Slurm needs '{}' (Debian package {}; scripts/setup.sh installs it)", tool, package);
  }
}

std::string slurm_conf(const cluster::ClusterSpec& spec, const std::string& dir) {
  const int cpus = spec.slurm_cpus > 0 ? spec.slurm_cpus : available_cores();
  const long long memory = spec.slurm_memory_mb > 0
                               ? spec.slurm_memory_mb
                               : std::max<long long>(256, available_memory_bytes() / (1 << 20) / spec.hosts);
  std::string c = fmt::format(
      "# Written by dlscale cluster up --slurm for cluster '{name}' (docs/slurm.md).\n"
      "ClusterName={name}\nSlurmctldHost={h0}({a0})\n"
      "SlurmUser=root\nSlurmdUser=root\n"
      "AuthType=auth/munge\nCredType=cred/munge\nAuthInfo=socket={dir}/munge/munge.socket\n"
      "SlurmctldPort=6817\nSlurmdPort=6818\n"
      "StateSaveLocation={dir}/state\nSlurmdSpoolDir={dir}/spool/%n\n"
      "SlurmctldPidFile={dir}/slurmctld.pid\nSlurmdPidFile={dir}/spool/%n/slurmd.pid\n"
      "# Per node: PMIx (srun --mpi=pmix) keeps its directories there, which\n"
      "# would collide in the hosts' shared /tmp.\nTmpFS={dir}/tmp/%n\n"
      "SlurmctldLogFile={dir}/log/slurmctld.log\nSlurmdLogFile={dir}/log/slurmd-%n.log\n"
      "# No systemd, no cgroups: processes are tracked by group, nothing is confined.\n"
      "ProctrackType=proctrack/pgid\nTaskPlugin=task/none\nJobAcctGatherType=jobacct_gather/none\n"
      "AccountingStorageType=accounting_storage/none\n"
      "SelectType=select/cons_tres\nSelectTypeParameters=CR_Core\n"
      "SchedulerType=sched/backfill\nMpiDefault=none\nMpiParams=ports=12000-12999\n"
      "# Every emulated host shares this machine: take CPUs and memory as configured.\n"
      "SlurmdParameters=config_overrides\nReturnToService=2\n"
      "SlurmctldTimeout=30\nSlurmdTimeout=10\nMessageTimeout=10\nInactiveLimit=0\nKillWait=5\n"
      "KillOnBadExit=0\nMinJobAge=600\n",
      fmt::arg("name", spec.name), fmt::arg("h0", cluster::host_name(spec.name, 0)),
      fmt::arg("a0", cluster::host_address(0)), fmt::arg("dir", dir));
  for (int h = 0; h < spec.hosts; ++h) {
    c += fmt::format("NodeName={} NodeAddr={} CPUs={} RealMemory={} State=UNKNOWN\n",
                     cluster::host_name(spec.name, h), cluster::host_address(h), cpus, memory);
  }
  c += "PartitionName=dls Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n";
  return c;
}

void start_slurm(const cluster::ClusterSpec& spec) {
  check_slurm_installed();
  make_tree(spec);
  const std::string dir = slurm_dir(spec.name);
  const std::string log_dir = dir + "/log";
  std::vector<Daemon> daemons;
  daemons.push_back(start_daemon(
      spec.name, 0, "munged",
      {"munged", "-F", "--key-file=" + dir + "/key/munge.key", "--socket=" + dir + "/munge/munge.socket",
       "--pid-file=" + dir + "/munge/munged.pid", "--log-file=" + log_dir + "/munged.log",
       "--seed-file=" + dir + "/key/munged.seed", "--origin=" + cluster::host_address(0)}));
  wait_for_socket(daemons, dir + "/munge/munge.socket", log_dir);
  daemons.push_back(start_daemon(spec.name, 0, "slurmctld", {"slurmctld", "-D", "-i"}));
  for (int h = 0; h < spec.hosts; ++h) {
    daemons.push_back(
        start_daemon(spec.name, h, "slurmd", {"slurmd", "-D", "-N", cluster::host_name(spec.name, h)}));
  }
  wait_for_nodes(daemons, spec, log_dir);
  // They outlive `up`; `down` kills them with the hosts' namespaces.
  for (Daemon& d : daemons) d.child.release();
}

void remove_slurm_files(const std::string& cluster) { remove_tree(slurm_dir(cluster)); }

std::string slurm_state(const std::string& cluster) {
  std::error_code ec;
  if (!fs::exists(slurm_conf_path(cluster), ec)) return "";
  const std::string pid_text = fs::exists(path_in(cluster, "slurmctld.pid"), ec)
                                   ? read_file(path_in(cluster, "slurmctld.pid")) : "";
  const long pid = std::atol(pid_text.c_str());
  const bool alive = pid > 0 && ::kill(static_cast<pid_t>(pid), 0) == 0;
  return alive ? "running" : "stopped";
}

std::vector<std::pair<std::string, std::string>> slurm_client_env(const std::string& cluster) {
  std::error_code ec;
  if (!fs::exists(slurm_conf_path(cluster), ec)) return {};
  return {{"SLURM_CONF", slurm_conf_path(cluster)}};
}

}  // namespace dlscale::slurm
