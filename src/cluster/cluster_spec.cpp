// The emulated cluster's spec and names (cluster/cluster.h): the checks of
// what `up` is asked, the congestion controls this machine offers, the
// descriptions and records of a cluster, its hosts' names and addresses.
// Building and removing clusters is in cluster.cpp.
#include <algorithm>
#include <sstream>

#include "cluster/cluster.h"
#include "core/error.h"
#include "core/files.h"
#include "core/record_keys.h"
#include "core/text.h"

namespace dlscale::cluster {
namespace {
constexpr double kMaxMbit = 100000;
}  // namespace

nlohmann::json cluster_json(const std::string& name, int hosts, int workers_per_host,
                            double link_mbit, int rack_hosts, double uplink_mbit,
                            const std::string& tcp_cc) {
  if (name.empty()) return nullptr;
  namespace in = record::input;
  nlohmann::json j = {{in::kClusterName, name},
                      {in::kClusterHosts, hosts},
                      {in::kClusterWorkersPerHost, workers_per_host},
                      {in::kClusterLinkMbit, link_mbit},
                      {in::kClusterRackHosts, rack_hosts},
                      {in::kClusterUplinkMbit, uplink_mbit}};
  if (!tcp_cc.empty()) j[in::kClusterTcpCc] = tcp_cc;
  return j;
}

void check_cluster_name(const std::string& name) {
  DLSCALE_CHECK(
      !name.empty() && name.size() <= 12 &&
          std::all_of(name.begin(), name.end(),
                      [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }),
      "cluster name '{}' must be 1 to 12 lower-case letters or digits", name);
}

void check_cluster_spec(const ClusterSpec& s) {
  check_cluster_name(s.name);
  DLSCALE_CHECK(s.hosts >= 1 && s.hosts <= kMaxHosts, "--hosts must be in [1, {}] (got {})",
                kMaxHosts, s.hosts);
  DLSCALE_CHECK(s.link_mbit == 0 || (s.link_mbit >= 1 && s.link_mbit <= kMaxMbit),
                "--link-mbit must be 0 (unshaped) or in [1, {:g}] Mbit/s (got {:g})", kMaxMbit,
                s.link_mbit);
  DLSCALE_CHECK(s.rack_hosts == 0 || (s.rack_hosts >= 1 && s.rack_hosts < s.hosts),
                "--rack-hosts must be 0 (one switch) or in [1, --hosts - 1] = [1, {}] (got {})",
                s.hosts - 1, s.rack_hosts);
  DLSCALE_CHECK(s.uplink_mbit == 0 || (s.uplink_mbit >= 1 && s.uplink_mbit <= kMaxMbit),
                "--uplink-mbit must be 0 (unshaped) or in [1, {:g}] Mbit/s (got {:g})", kMaxMbit,
                s.uplink_mbit);
  DLSCALE_CHECK(s.rack_hosts > 0 || s.uplink_mbit == 0,
                "--uplink-mbit needs --rack-hosts (the racks it joins)");
  DLSCALE_CHECK(s.slurm_cpus >= 0 && s.slurm_cpus <= 4096,
                "--slurm-cpus must be in [0, 4096] (got {})", s.slurm_cpus);
  DLSCALE_CHECK(s.slurm_memory_mb >= 0 && s.slurm_memory_mb <= (1LL << 30),
                "--slurm-memory-mb must be in [0, {}] (got {})", 1LL << 30, s.slurm_memory_mb);
  DLSCALE_CHECK(s.slurm || (s.slurm_cpus == 0 && s.slurm_memory_mb == 0),
                "--slurm-cpus and --slurm-memory-mb need --slurm");
  check_tcp_cc(s.tcp_cc);
}

void check_tcp_cc(const std::string& name) {
  // The kernel's names: at most 15 characters (TCP_CA_NAME_MAX less its NUL).
  DLSCALE_CHECK(
      !name.empty() && name.size() <= 15 &&
          std::all_of(
              name.begin(), name.end(),
              [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; }),
      "--tcp-cc '{}' must be a congestion control's name (1 to 15 lower-case letters, "
      "digits or '_', e.g. cubic, bbr, reno) or '{}'",
      name, kSystemTcpCc);
}

std::vector<std::string> available_tcp_ccs() {
  std::vector<std::string> names;
  std::istringstream in(read_file("/proc/sys/net/ipv4/tcp_available_congestion_control"));
  for (std::string n; in >> n;) names.push_back(n);
  return names;
}

std::string system_tcp_cc() {
  std::istringstream in(read_file("/proc/sys/net/ipv4/tcp_congestion_control"));
  std::string name;
  in >> name;
  return name;
}

ClusterSpec resolve_tcp_cc(ClusterSpec spec) {
  if (spec.tcp_cc == kSystemTcpCc) spec.tcp_cc = system_tcp_cc();
  const std::vector<std::string> offered = available_tcp_ccs();
  DLSCALE_CHECK(std::find(offered.begin(), offered.end(), spec.tcp_cc) != offered.end(),
                "--tcp-cc '{}' is not available on this machine (available: {}; a module may need "
                "loading: modprobe tcp_{})",
                spec.tcp_cc, join(offered, " "), spec.tcp_cc);
  return spec;
}

std::string describe(const ClusterSpec& s) {
  const std::string hosts = fmt::format("{} host{}", s.hosts, s.hosts == 1 ? "" : "s");
  std::string more;
  if (s.rack_hosts > 0) {
    more = fmt::format(", racks of {} host{} with {}", s.rack_hosts, s.rack_hosts == 1 ? "" : "s",
                       s.uplink_mbit > 0 ? fmt::format("uplinks of {:g} Mbit/s", s.uplink_mbit)
                                         : "unshaped uplinks");
  }
  if (s.slurm) more += ", with Slurm";
  more += s.tcp_cc.empty() ? ", TCP as the machine's default was" : ", TCP " + s.tcp_cc;
  if (s.link_mbit <= 0) return hosts + ", unshaped links" + more;
  return fmt::format("{}, links of {:g} Mbit/s each way{}", hosts, s.link_mbit, more);
}

std::string host_namespace(const std::string& name, int host) {
  return fmt::format("dls-{}-h{}", name, host);
}
std::string switch_namespace(const std::string& name) { return fmt::format("dls-{}-sw", name); }
std::string host_address(int host) { return fmt::format("10.77.0.{}", host + 1); }
std::string host_name(const std::string& name, int host) {
  return fmt::format("{}-h{}", name, host);
}

int parse_host(const ClusterSpec& spec, const std::string& text) {
  for (int h = 0; h < spec.hosts; ++h) {
    if (text == std::to_string(h) || text == "h" + std::to_string(h) ||
        text == host_name(spec.name, h) || text == host_address(h)) {
      return h;
    }
  }
  throw Error(fmt::format("cluster '{}' has no host '{}'; hosts are 0..{} (or h0, {}, {})",
                          spec.name, text, spec.hosts - 1, host_name(spec.name, 0),
                          host_address(0)));
}

}  // namespace dlscale::cluster
