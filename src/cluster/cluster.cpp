#include "cluster/cluster.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "core/files.h"
#include "core/job_env.h"
#include "core/subprocess.h"
#include "core/text.h"

namespace dlscale::cluster {
namespace {

namespace fs = std::filesystem;

constexpr const char* kNetnsDir = "/run/netns";
constexpr const char* kStateDir = "/run/dlscale/clusters";

std::string state_path(const std::string& name) {
  return std::string(kStateDir) + "/" + name + ".json";
}
std::string hosts_path(const std::string& name) {
  return std::string(kStateDir) + "/" + name + ".hosts";
}

/// Runs `ip`/`tc`; throws dlscale::Error naming the command and its message.
void run_tool(const std::vector<std::string>& argv) {
  std::string output;
  const int rc = run_captured(argv, &output);
  if (rc == 0) return;
  while (!output.empty() && (output.back() == '\n' || output.back() == ' ')) output.pop_back();
  throw Error(fmt::format("cluster: '{}' failed: {}", join(argv, " "),
                          output.substr(0, output.find('\n'))));
}

/// The cluster a namespace belongs to ("dls-NAME-sw" / "dls-NAME-hI"), or "".
std::string cluster_of(const std::string& ns) {
  if (ns.rfind("dls-", 0) != 0) return "";
  const size_t dash = ns.rfind('-');
  if (dash <= 4) return "";
  const std::string tail = ns.substr(dash + 1);
  const bool host = tail.size() > 1 && tail[0] == 'h' &&
                    std::all_of(tail.begin() + 1, tail.end(), ::isdigit);
  if (tail != "sw" && !host) return "";
  return ns.substr(4, dash - 4);
}

/// Namespaces that exist now, by cluster.
std::map<std::string, std::vector<std::string>> namespaces_by_cluster() {
  std::map<std::string, std::vector<std::string>> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(kNetnsDir, ec)) {
    const std::string ns = e.path().filename();
    const std::string name = cluster_of(ns);
    if (!name.empty()) out[name].push_back(ns);
  }
  for (auto& [name, list] : out) std::sort(list.begin(), list.end());
  return out;
}

std::optional<ClusterSpec> read_state(const std::string& name) {
  std::error_code ec;
  if (!fs::exists(state_path(name), ec)) return std::nullopt;
  try {
    const nlohmann::json j = nlohmann::json::parse(read_file(state_path(name)));
    ClusterSpec s;
    s.name = j.at("name").get<std::string>();
    s.hosts = j.at("hosts").get<int>();
    s.link_mbit = j.at("link_mbit").get<double>();
    s.rack_hosts = j.value("rack_hosts", 0);
    s.uplink_mbit = j.value("uplink_mbit", 0.0);
    s.slurm = j.value("slurm", false);
    s.slurm_cpus = j.value("slurm_cpus", 0);
    s.slurm_memory_mb = j.value("slurm_memory_mb", 0LL);
    s.tcp_cc = j.value("tcp_cc", std::string());  // none: made before dlscale set it
    return s;
  } catch (const std::exception&) {
    return std::nullopt;  // a torn or foreign file: the cluster is incomplete
  }
}

ClusterStatus status_of(const std::string& name,
                        const std::map<std::string, std::vector<std::string>>& all) {
  ClusterStatus st;
  st.spec.name = name;
  st.spec.hosts = 0;
  if (const auto it = all.find(name); it != all.end()) st.namespaces = it->second;
  if (const std::optional<ClusterSpec> s = read_state(name)) {
    st.spec = *s;
    bool all_there = std::count(st.namespaces.begin(), st.namespaces.end(),
                                switch_namespace(name)) == 1;
    for (int h = 0; h < s->hosts; ++h) {
      all_there = all_there && std::count(st.namespaces.begin(), st.namespaces.end(),
                                          host_namespace(name, h)) == 1;
    }
    st.complete = all_there && static_cast<int>(st.namespaces.size()) == s->hosts + 1;
  }
  return st;
}

/// Serialises `up` and `down` between processes (a sweep and a user).
class StateLock {
 public:
  StateLock() {
    std::error_code ec;
    fs::create_directories(kStateDir, ec);
    fd_ = ::open((std::string(kStateDir) + "/.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    DLSCALE_CHECK(fd_ >= 0, "cluster: cannot open {}/.lock: {}", kStateDir, std::strerror(errno));
    ::flock(fd_, LOCK_EX);
  }
  ~StateLock() { ::close(fd_); }
  StateLock(const StateLock&) = delete;
  StateLock& operator=(const StateLock&) = delete;

 private:
  int fd_ = -1;
};

/// Kills whatever still runs in `ns` (a crashed job's workers), then deletes it.
void remove_namespace(const std::string& ns) {
  std::string pids;
  if (run_captured({"ip", "netns", "pids", ns}, &pids) == 0) {
    std::istringstream in(pids);
    for (pid_t pid; in >> pid;) ::kill(pid, SIGKILL);
  }
  run_tool({"ip", "netns", "delete", ns});
}

void remove_leftovers(const std::string& name) {
  const auto all = namespaces_by_cluster();
  if (const auto it = all.find(name); it != all.end()) {
    for (const std::string& ns : it->second) remove_namespace(ns);
  }
  std::error_code ec;
  fs::remove(state_path(name), ec);
  fs::remove(hosts_path(name), ec);
  // The services' directories: NAME.SERVICE/ (names have no '.').
  std::vector<fs::path> services;
  for (const auto& e : fs::directory_iterator(kStateDir, ec)) {
    if (e.is_directory(ec) && e.path().filename().string().rfind(name + ".", 0) == 0) services.push_back(e.path());
  }
  for (const fs::path& dir : services) remove_tree(dir);
}

/// Every host's name and address, for each host's /etc/hosts.
void write_hosts_file(const ClusterSpec& spec) {
  std::string text = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n";
  for (int h = 0; h < spec.hosts; ++h) text += host_address(h) + "\t" + host_name(spec.name, h) + "\n";
  write_file_atomic(hosts_path(spec.name), text);
}

void shape(const std::string& ns, const std::string& dev, double mbit) {
  const double bytes_per_s = mbit * 1e6 / 8;
  // tbf needs a bucket of at least one timer tick of traffic; 64 KiB also
  // lets a whole GSO packet through without splitting it.
  const long long burst = std::max(65536LL, std::llround(bytes_per_s * 0.005));
  run_tool({"tc", "-n", ns, "qdisc", "replace", "dev", dev, "root", "tbf", "rate",
            fmt::format("{}kbit", std::llround(mbit * 1000)), "burst", std::to_string(burst),
            "latency", "100ms"});
}

void add_bridge(const std::string& sw, const std::string& bridge) {
  run_tool({"ip", "-n", sw, "link", "add", bridge, "type", "bridge"});
  run_tool({"ip", "-n", sw, "link", "set", bridge, "up"});
}

/// The racks' bridges rR, each joined to the spine br0 by the veth pair
/// uR (rack side) - sR (spine side), both shaped: uR carries what leaves
/// the rack, sR what enters it.
void build_racks(const ClusterSpec& spec, const std::string& sw) {
  for (int r = 0; r < spec.racks(); ++r) {
    const std::string rack = "r" + std::to_string(r), up = "u" + std::to_string(r),
                      down = "s" + std::to_string(r);
    add_bridge(sw, rack);
    run_tool({"ip", "-n", sw, "link", "add", up, "type", "veth", "peer", "name", down});
    run_tool({"ip", "-n", sw, "link", "set", up, "master", rack});
    run_tool({"ip", "-n", sw, "link", "set", down, "master", "br0"});
    for (const std::string& dev : {up, down}) run_tool({"ip", "-n", sw, "link", "set", dev, "up"});
    if (spec.uplink_mbit > 0) {
      shape(sw, up, spec.uplink_mbit);
      shape(sw, down, spec.uplink_mbit);
    }
  }
}

/// The bridge host `h`'s link plugs into: its rack's, or br0.
std::string host_bridge(const ClusterSpec& spec, int h) {
  return spec.rack_hosts > 0 ? "r" + std::to_string(h / spec.rack_hosts) : "br0";
}

void build(const ClusterSpec& spec) {
  const std::string sw = switch_namespace(spec.name);
  run_tool({"ip", "netns", "add", sw});
  run_tool({"ip", "-n", sw, "link", "set", "lo", "up"});
  add_bridge(sw, "br0");
  if (spec.rack_hosts > 0) build_racks(spec, sw);
  for (int h = 0; h < spec.hosts; ++h) {
    const std::string ns = host_namespace(spec.name, h);
    const std::string port = "p" + std::to_string(h);
    run_tool({"ip", "netns", "add", ns});
    // Both ends are created inside their namespaces: nothing ever appears
    // among the machine's own interfaces.
    run_tool({"ip", "link", "add", "eth0", "netns", ns, "type", "veth", "peer", "name", port,
              "netns", sw});
    run_tool({"ip", "-n", sw, "link", "set", port, "master", host_bridge(spec, h)});
    run_tool({"ip", "-n", sw, "link", "set", port, "up"});
    run_tool({"ip", "-n", ns, "addr", "add", host_address(h) + "/24", "dev", "eth0"});
    run_tool({"ip", "-n", ns, "link", "set", "eth0", "up"});
    run_tool({"ip", "-n", ns, "link", "set", "lo", "up"});
    // Every connection to another host takes the cluster's congestion
    // control from its route (a namespace's own default cannot be set here).
    run_tool({"ip", "-n", ns, "route", "replace", kSubnet, "dev", "eth0", "proto", "kernel",
              "scope", "link", "src", host_address(h), "congctl", spec.tcp_cc});
    if (spec.link_mbit > 0) {
      shape(ns, "eth0", spec.link_mbit);  // host -> switch
      shape(sw, port, spec.link_mbit);    // switch -> host
    }
  }
}

}  // namespace

void check_can_manage() {
  DLSCALE_CHECK(::geteuid() == 0,
                "dlscale cluster needs root (CAP_NET_ADMIN) to create network namespaces; run "
                "it as root or with sudo");
  std::string out;
  for (const char* tool : {"ip", "tc"}) {
    DLSCALE_CHECK(run_captured({tool, "-V"}, &out) == 0,
                  "dlscale cluster needs '{}' (Debian package iproute2; scripts/setup.sh "
                  "installs it)",
                  tool);
  }
}

UpResult cluster_up(const ClusterSpec& asked, const StartServices& services) {
  check_cluster_spec(asked);
  DLSCALE_ASSERT(!asked.slurm || services);  // the caller passes slurm::start_slurm
  check_can_manage();
  const ClusterSpec spec = resolve_tcp_cc(asked);
  StateLock lock;
  const ClusterStatus now = status_of(spec.name, namespaces_by_cluster());
  if (now.complete) {
    DLSCALE_CHECK(now.spec == spec,
                  "cluster '{}' is up with {}; run 'dlscale cluster down --name {}' first to "
                  "change it",
                  spec.name, describe(now.spec), spec.name);
    return {UpOutcome::kAlreadyUp, spec};
  }
  remove_leftovers(spec.name);  // leftovers of a crashed up or a crashed down
  try {
    build(spec);
    std::error_code ec;
    fs::create_directories(kStateDir, ec);
    write_hosts_file(spec);
    if (spec.slurm) services(spec);
    nlohmann::json state = {{"name", spec.name},
                            {"hosts", spec.hosts},
                            {"link_mbit", spec.link_mbit},
                            {"subnet", kSubnet},
                            {"rack_hosts", spec.rack_hosts},
                            {"uplink_mbit", spec.uplink_mbit},
                            {"slurm", spec.slurm},
                            {"slurm_cpus", spec.slurm_cpus},
                            {"slurm_memory_mb", spec.slurm_memory_mb},
                            {"tcp_cc", spec.tcp_cc}};
    write_file_atomic(state_path(spec.name), dump_json(state, 2) + "\n");
  } catch (...) {
    remove_leftovers(spec.name);
    throw;
  }
  return {UpOutcome::kCreated, spec};
}

bool cluster_down(const std::string& name) {
  check_cluster_name(name);
  check_can_manage();
  StateLock lock;
  const ClusterStatus now = status_of(name, namespaces_by_cluster());
  std::error_code ec;
  const bool existed = !now.namespaces.empty() || fs::exists(state_path(name), ec);
  remove_leftovers(name);
  return existed;
}

std::vector<ClusterStatus> cluster_list() {
  const auto all = namespaces_by_cluster();
  std::vector<std::string> names;
  for (const auto& [name, list] : all) names.push_back(name);
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(kStateDir, ec)) {
    if (e.path().extension() == ".json") names.push_back(e.path().stem());
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  std::vector<ClusterStatus> out;
  for (const std::string& name : names) out.push_back(status_of(name, all));
  return out;
}

std::optional<ClusterSpec> find_cluster(const std::string& name) {
  check_cluster_name(name);
  const ClusterStatus st = status_of(name, namespaces_by_cluster());
  if (!st.complete) return std::nullopt;
  return st.spec;
}

ClusterSpec require_cluster(const std::string& name) {
  const std::optional<ClusterSpec> spec = find_cluster(name);
  DLSCALE_CHECK(spec.has_value(),
                "cluster '{}' is not up; create it with 'dlscale cluster up --name {} --hosts K' "
                "(docs/cluster.md)",
                name, name);
  return *spec;
}

namespace {

/// Whether `dev` in `ns` is administratively or physically down.
bool link_down(const std::string& ns, const std::string& dev) {
  std::string out;
  if (run_captured({"ip", "-n", ns, "-o", "link", "show", "dev", dev}, &out) != 0) return true;
  const size_t open = out.find('<'), close = out.find('>');
  if (open == std::string::npos || close == std::string::npos) return true;
  const std::string flags = "," + out.substr(open + 1, close - open - 1) + ",";
  return flags.find(",UP,") == std::string::npos || flags.find(",LOWER_UP,") == std::string::npos;
}

}  // namespace

std::vector<int> hosts_with_link_down(const ClusterSpec& spec) {
  std::vector<int> down;
  const std::string sw = switch_namespace(spec.name);
  for (int h = 0; h < spec.hosts; ++h) {
    const std::string rack = spec.rack_hosts > 0 ? std::to_string(h / spec.rack_hosts) : "";
    if (link_down(host_namespace(spec.name, h), "eth0") || link_down(sw, "p" + std::to_string(h)) ||
        (!rack.empty() && (link_down(sw, "u" + rack) || link_down(sw, "s" + rack)))) {
      down.push_back(h);  // its own link, or its rack's uplink
    }
  }
  return down;
}

std::vector<std::string> mpirun_command(const ClusterSpec& spec, const MpirunOptions& o) {
  DLSCALE_CHECK(o.workers_per_host >= 1 && o.workers_per_host <= 1024,
                "--workers-per-host must be in [1, 1024] (got {})", o.workers_per_host);
  DLSCALE_CHECK(!o.command.empty(), "cluster mpirun needs a command after --");
  std::string hosts;
  for (int h = 0; h < spec.hosts; ++h) {
    hosts += fmt::format("{}{}:{}", h == 0 ? "" : ",", host_address(h), o.workers_per_host);
  }
  std::vector<std::string> argv = {"mpirun", "-np", std::to_string(spec.hosts * o.workers_per_host),
                                   "--host", hosts, "--oversubscribe"};
  if (::geteuid() == 0) argv.push_back("--allow-run-as-root");
  for (const char* kv : {"plm_rsh_agent", "btl", "btl_tcp_if_include", "oob_tcp_if_include"}) {
    argv.insert(argv.end(), {"--mca", kv});
    const std::string k = kv;
    argv.push_back(k == "plm_rsh_agent" ? o.agent : k == "btl" ? "self,vader,tcp" : kSubnet);
  }
  // The job secret (Gloo under mpirun) and the launch environment reach
  // every rank, as `-x` does across real hosts.
  argv.insert(argv.end(), {"-x", kEnvJobSecret});
  argv.insert(argv.end(), o.extra.begin(), o.extra.end());
  argv.insert(argv.end(), o.command.begin(), o.command.end());
  return argv;
}

std::string cluster_state_dir() { return kStateDir; }

std::string cluster_service_dir(const std::string& name, const std::string& service) {
  check_cluster_name(name);
  return std::string(kStateDir) + "/" + name + "." + service;
}

HostEntry host_entry(const std::string& name, int host) {
  check_cluster_name(name);
  std::error_code ec;
  const std::string hosts = fs::exists(hosts_path(name), ec) ? hosts_path(name) : "";
  const std::optional<ClusterSpec> spec = read_state(name);
  return {std::string(kNetnsDir) + "/" + host_namespace(name, host), host_name(name, host), hosts,
          spec.has_value() && spec->slurm};
}

int enter_host(const HostEntry& entry, const char** what) {
  const int fd = ::open(entry.netns_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *what = "open the host's network namespace";
    return errno;
  }
  const int rc = ::setns(fd, CLONE_NEWNET);
  const int err = errno;
  ::close(fd);
  if (rc != 0) {
    *what = "enter the host's network namespace";
    return err;
  }
  if (::unshare(CLONE_NEWUTS) != 0 ||
      ::sethostname(entry.hostname.data(), entry.hostname.size()) != 0) {
    *what = "set the host's name";
    return errno;
  }
  if (entry.hosts_file.empty()) return 0;
  // Private, so the bind stays in this namespace and nothing of it reaches
  // the machine's own mounts.
  if (::unshare(CLONE_NEWNS) != 0 || ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
      ::mount(entry.hosts_file.c_str(), "/etc/hosts", nullptr, MS_BIND, nullptr) != 0) {
    if (!entry.hosts_file_required) return 0;  // names are a convenience without Slurm
    *what = "mount the cluster's hosts file on /etc/hosts";
    return errno;
  }
  return 0;
}

}  // namespace dlscale::cluster
