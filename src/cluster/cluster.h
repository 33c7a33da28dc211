#pragma once
// An emulated multi-host cluster on one machine (docs/cluster.md): K network
// namespaces ("hosts"), each with its own address on a private subnet, joined
// through a bridge that lives in a namespace of its own (the "switch") by
// veth links, optionally shaped with tbf to X Mbit/s each way. Nothing is
// ever configured in the machine's own network namespace, so `down` (which
// deletes every namespace of the cluster) removes everything `up` made, even
// after a crash. Needs root (CAP_NET_ADMIN) and iproute2's `ip` and `tc`.
#include <nlohmann/json.hpp>
#include <optional>
#include <functional>
#include <string>
#include <vector>

namespace dlscale::cluster {

inline constexpr int kMaxHosts = 64;
/// The hosts' subnet, the same in every cluster (each cluster is isolated):
/// host i has 10.77.0.(i+1)/24.
inline constexpr const char* kSubnet = "10.77.0.0/24";
/// The hosts' TCP congestion control unless asked otherwise: Linux's own
/// default (and Debian's), so that a cluster behaves alike on machines whose
/// owners chose another (docs/cluster.md, "TCP congestion control").
inline constexpr const char* kDefaultTcpCc = "cubic";
/// --tcp-cc's value for "whatever this machine's default is when `up` runs".
inline constexpr const char* kSystemTcpCc = "system";

/// What `cluster up` builds.
struct ClusterSpec {
  std::string name = "dls";  ///< [a-z0-9], 1..12 characters
  int hosts = 2;             ///< namespaces with one address each, 1..kMaxHosts
  double link_mbit = 0;      ///< each host's link rate each way; 0 = unshaped
  /// A shared fabric: hosts in racks of `rack_hosts` (host h in rack
  /// h / rack_hosts), each rack's switch joined to a spine by one uplink
  /// that all its cross-rack traffic shares; 0 = one switch for all.
  int rack_hosts = 0;
  double uplink_mbit = 0;  ///< each rack's uplink rate each way; 0 = unshaped
  /// The congestion control of every TCP connection between hosts (a route
  /// attribute in each host); kSystemTcpCc before `up` resolves it; "" in
  /// the state of a cluster made before dlscale set it (the machine's
  /// default of the time).
  std::string tcp_cc = kDefaultTcpCc;
  int racks() const { return rack_hosts > 0 ? (hosts + rack_hosts - 1) / rack_hosts : 1; }
  /// A real Slurm on the hosts (slurm/slurm_cluster.h): slurmctld in host 0,
  /// one slurmd per host.
  bool slurm = false;
  int slurm_cpus = 0;           ///< CPUs of each Slurm node; 0 = this machine's cores
  long long slurm_memory_mb = 0;  ///< memory of each Slurm node; 0 = this machine's ÷ hosts
  bool operator==(const ClusterSpec& o) const {
    return name == o.name && hosts == o.hosts && link_mbit == o.link_mbit &&
           rack_hosts == o.rack_hosts && uplink_mbit == o.uplink_mbit && slurm == o.slurm &&
           slurm_cpus == o.slurm_cpus && slurm_memory_mb == o.slurm_memory_mb && tcp_cc == o.tcp_cc;
  }
};

/// Where a cluster's files live: its state (NAME.json), the hosts' shared
/// /etc/hosts (NAME.hosts) and its services' directories (NAME.SERVICE/).
std::string cluster_state_dir();
/// The directory the cluster's `service` (e.g. "slurm") keeps its files in;
/// removed with the cluster (the services' daemons die with the hosts'
/// namespaces first). Throws dlscale::Error for a bad cluster name.
std::string cluster_service_dir(const std::string& name, const std::string& service);

/// A record's `inputs.cluster`: {name, hosts, workers_per_host, link_mbit,
/// rack_hosts, uplink_mbit, tcp_cc (when known)}, or null outside a cluster
/// job (`name` empty).
nlohmann::json cluster_json(const std::string& name, int hosts, int workers_per_host,
                            double link_mbit, int rack_hosts = 0, double uplink_mbit = 0,
                            const std::string& tcp_cc = "");

/// Throws dlscale::Error (one line; the CLI exits 2) unless `name` is 1 to
/// 12 lower-case letters or digits. Every function below that takes a name
/// checks it first: a name becomes a namespace and a state file's name, so
/// one such as '../../tmp/x' must never reach a path.
void check_cluster_name(const std::string& name);
/// Throws dlscale::Error naming the bad value.
void check_cluster_spec(const ClusterSpec& spec);
/// Throws dlscale::Error (one line) unless `name` can be a congestion
/// control's name (the kernel's form) or kSystemTcpCc.
void check_tcp_cc(const std::string& name);
/// "2 hosts, links of 100 Mbit/s" / "2 hosts, unshaped links", then
/// ", racks of 2 hosts with uplinks of 50 Mbit/s" with racks, then ", TCP
/// cubic".
std::string describe(const ClusterSpec& spec);
/// The congestion controls this machine's kernel offers
/// (net.ipv4.tcp_available_congestion_control) and its default.
std::vector<std::string> available_tcp_ccs();
std::string system_tcp_cc();
/// `spec` with kSystemTcpCc replaced by this machine's default; throws
/// dlscale::Error (one line) when its congestion control is not available.
ClusterSpec resolve_tcp_cc(ClusterSpec spec);

/// The namespace of host `host` of cluster `name`: "dls-NAME-hHOST".
std::string host_namespace(const std::string& name, int host);
/// The namespace holding the cluster's bridges (the hosts' or the racks'
/// and the spine's) and the uplinks: "dls-NAME-sw".
std::string switch_namespace(const std::string& name);
/// Host `host`'s address: "10.77.0.(host+1)".
std::string host_address(int host);
/// Host `host`'s host name inside its namespace: "NAME-hHOST".
std::string host_name(const std::string& name, int host);
/// The host a user named: an index ("2"), "h2", the host name or the address.
/// Throws dlscale::Error naming the allowed forms.
int parse_host(const ClusterSpec& spec, const std::string& text);

/// Throws dlscale::Error (one line; the CLI exits 2) unless this process can
/// build clusters: root, and `ip` and `tc` on PATH.
void check_can_manage();

enum class UpOutcome { kCreated, kAlreadyUp };
struct UpResult {
  UpOutcome outcome = UpOutcome::kCreated;
  ClusterSpec spec;  ///< as built: kSystemTcpCc resolved to this machine's default
};
/// What runs on a cluster beside its hosts (spec.slurm: slurm::start_slurm,
/// from a layer above this one): started once the hosts and their
/// /etc/hosts are up; a throw removes the cluster again.
using StartServices = std::function<void(const ClusterSpec&)>;
/// Creates the cluster, or does nothing when it is already up as specified.
/// A cluster of the same name with another spec is refused (down it first);
/// leftovers of a crashed `up` are removed first. On failure, whatever was
/// made is removed again and dlscale::Error names the failing command. A
/// spec with `slurm` needs `services`.
UpResult cluster_up(const ClusterSpec& spec, const StartServices& services = {});
/// Removes every namespace (and so every link and the bridge) of the cluster
/// and its state. Returns false when there was nothing to remove.
bool cluster_down(const std::string& name);

struct ClusterStatus {
  ClusterSpec spec;             ///< as recorded by `up` (hosts = 0 when unknown)
  std::vector<std::string> namespaces;  ///< those that exist now
  bool complete = false;        ///< every namespace there and the state recorded
};
/// Every cluster with a namespace or a state file, by name.
std::vector<ClusterStatus> cluster_list();
/// The spec of cluster `name` when it is up and complete.
std::optional<ClusterSpec> find_cluster(const std::string& name);
/// find_cluster, or dlscale::Error saying how to create it.
ClusterSpec require_cluster(const std::string& name);

/// Hosts whose link is down at either end (`ip link set ... down` on the
/// host's eth0 or the switch's port), or whose rack's uplink is: what a
/// failed job's error names first.
std::vector<int> hosts_with_link_down(const ClusterSpec& spec);

/// `dlscale cluster mpirun`: the mpirun command line that runs `command` as
/// hosts x `workers_per_host` ranks, `workers_per_host` in each host, with
/// Open MPI's remote-shell agent set to `agent` (`dlscale cluster agent
/// --name NAME`, which enters a host's namespaces like ssh would log in)
/// and its TCP transports held to the cluster's subnet, so that messages
/// between hosts cross the shaped links. To be run inside host 0.
struct MpirunOptions {
  int workers_per_host = 1;
  std::string agent;                 ///< the remote-shell agent's command line
  std::vector<std::string> extra;    ///< more mpirun flags
  std::vector<std::string> command;  ///< the program each rank runs, and its arguments
};
std::vector<std::string> mpirun_command(const ClusterSpec& spec, const MpirunOptions& options);

/// What a process needs to become a process of one host, prepared before
/// fork so that the child only makes system calls.
struct HostEntry {
  std::string netns_path;  ///< /run/netns/dls-NAME-hI
  std::string hostname;    ///< NAME-hI
  /// The cluster's hosts file, mounted on /etc/hosts in a mount namespace of
  /// the process's own, so that every host resolves every host's name (as
  /// Slurm's node lists and Gloo need); "" = leave /etc/hosts alone.
  std::string hosts_file;
  /// Whether a failure to mount it fails the entry (Slurm's node names must
  /// resolve); otherwise the process goes on with the machine's /etc/hosts.
  bool hosts_file_required = false;
};
HostEntry host_entry(const std::string& name, int host);
/// Moves the calling thread into the host's network namespace and a UTS
/// namespace of its own carrying the host's name, and (with a hosts file) a
/// mount namespace of its own where /etc/hosts is the cluster's. Call it in a fresh child
/// before exec. Returns 0, or the errno of the failing call with `what`
/// naming it.
int enter_host(const HostEntry& entry, const char** what);

}  // namespace dlscale::cluster
