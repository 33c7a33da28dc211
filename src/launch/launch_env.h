#pragma once
// How this process was started: by hand (one worker, or a launcher about to
// spawn workers), by dlscale's own launcher, by mpirun or by srun. Read once,
// at the CLI edge, from an injected environment lookup.
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "cluster/cluster.h"
#include "core/job_env.h"

namespace dlscale::launch {

enum class LaunchKind {
  kStandalone,  ///< started by hand
  kSpawned,     ///< a worker started by `dlscale train --workers N`
  kMpirun,      ///< under Open MPI's mpirun (OMPI_COMM_WORLD_*)
  kSrun,        ///< a task of a Slurm job step (SLURM_PROCID, SLURM_STEP_NUM_TASKS)
  kExternal,    ///< another launcher, recognised by a registered rule (LaunchEnv::launcher)
};
std::string to_string(LaunchKind kind);

/// Where a process of an emulated-cluster job runs (DLSCALE_CLUSTER, set by
/// the cluster launcher for each host's node launcher and its workers).
struct ClusterHost {
  std::string name;      ///< "" = not in a cluster job
  int host = -1;         ///< this host's index
  int hosts = 0;         ///< hosts in the cluster
  double link_mbit = 0;  ///< each link's rate; 0 = unshaped
  int rack_hosts = 0;    ///< hosts in each rack; 0 = one switch
  double uplink_mbit = 0;  ///< each rack's uplink; 0 = unshaped
  std::string tcp_cc;      ///< the hosts' TCP congestion control; "" = not known
  /// DLSCALE_CLUSTER's value for host `host` of `spec`:
  /// NAME:HOST:HOSTS:LINK_MBIT:RACK_HOSTS:UPLINK_MBIT:TCP_CC.
  static std::string env_value(const cluster::ClusterSpec& spec, int host);
  /// The record's inputs.cluster (cluster::cluster_json), null outside a cluster.
  nlohmann::json to_json(int workers_per_host) const;
};

using cluster::cluster_json;  ///< cluster/cluster.h

/// The Slurm job step a task of `srun` belongs to (docs/slurm.md).
struct SlurmStep {
  std::string job_id;     ///< SLURM_JOB_ID
  std::string step_id;    ///< SLURM_STEP_ID
  std::string nodelist;   ///< SLURM_STEP_NODELIST as Slurm wrote it ("n[1-3,7]")
  std::string node_name;  ///< SLURMD_NODENAME: the node this task runs on
  int node_id = -1;       ///< SLURM_NODEID: its index in the step's nodes
  bool pmix = false;      ///< srun --mpi=pmix gave the task a PMIx server (PMIX_RANK)
  /// JSON for the record: {job_id, step_id, nodelist, nodes}, or null outside srun.
  nlohmann::json to_json() const;
};

/// The rendezvous port of a step that names none (no MASTER_PORT, no
/// --master-port, no SLURM_STEP_RESV_PORTS): derived from the job and step
/// IDs, so every task of the step computes the same one and two steps that
/// run at once on one node rarely meet. In [kSlurmPortBase, kSlurmPortBase + kSlurmPortSpan).
inline constexpr int kSlurmPortBase = 20000;
inline constexpr int kSlurmPortSpan = 20000;
int slurm_step_port(const std::string& job_id, const std::string& step_id);

struct LaunchEnv {
  LaunchKind kind = LaunchKind::kStandalone;
  /// The rule that recognised it: to_string(kind), or a registered rule's name.
  std::string launcher = "standalone";
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string master_addr;  ///< rendezvous host ("" = not given)
  int master_port = 0;      ///< rendezvous port (0 = not given)
  int status_fd = -1;       ///< progress pipe to dlscale's launcher, or -1
  /// The job's shared secret for the rendezvous store (DLSCALE_JOB_SECRET;
  /// dlscale's launcher makes one for its workers); "" = none.
  std::string job_secret;
  ClusterHost cluster;
  SlurmStep slurm;  ///< under srun
  /// The node this rank runs on, for hierarchical groups: the Slurm node
  /// under srun, else "" (the host name).
  std::string node_name;
  bool is_worker() const { return kind != LaunchKind::kStandalone; }
};

/// Returns the value of an environment variable or nullptr.
using EnvLookup = std::function<const char*(const char*)>;

/// A launcher's detection rule: when `env` is that launcher's, fills the
/// rank, world size, local rank and local world size (and master_addr and
/// master_port when the launcher says where ranks meet) and returns true.
struct LaunchRule {
  std::string name;  ///< how records and errors name the launcher
  std::function<bool(const EnvLookup& env, LaunchEnv& e)> detect;
};
/// Adds a rule, tried after the shipped ones (dlscale's own workers, mpirun,
/// srun); an environment it recognises is LaunchKind::kExternal: the command
/// line's --master-addr/--master-port win over the rule's, and rank 0 hosts
/// the rendezvous store. Throws dlscale::Error when the name is empty or
/// taken, or it has no detect.
void register_launch_rule(LaunchRule rule);

/// Reads the launch environment. Throws dlscale::Error naming the variable
/// when one is malformed (not an integer, rank outside the world, a host
/// list Slurm would not write). Under srun the rendezvous is MASTER_ADDR, or
/// the first node of SLURM_STEP_NODELIST; the port MASTER_PORT, or the first
/// of SLURM_STEP_RESV_PORTS, or slurm_step_port().
LaunchEnv detect_launch_env(const EnvLookup& env);

/// Environment variable names set by dlscale's launcher for its workers.
inline constexpr const char* kEnvRank = "DLSCALE_RANK";
inline constexpr const char* kEnvWorldSize = "DLSCALE_WORLD_SIZE";
inline constexpr const char* kEnvLocalRank = "DLSCALE_LOCAL_RANK";
inline constexpr const char* kEnvLocalWorldSize = "DLSCALE_LOCAL_WORLD_SIZE";
inline constexpr const char* kEnvMasterAddr = "DLSCALE_MASTER_ADDR";
inline constexpr const char* kEnvMasterPort = "DLSCALE_MASTER_PORT";
inline constexpr const char* kEnvStatusFd = "DLSCALE_STATUS_FD";
using dlscale::kEnvJobSecret;  ///< core/job_env.h
/// "1": a launcher exec's its workers, instead of forking them (libtorch/launch/job.h).
inline constexpr const char* kEnvWorkerExec = "DLSCALE_WORKER_EXEC";
/// "NAME:HOST:HOSTS:LINK_MBIT".
inline constexpr const char* kEnvCluster = "DLSCALE_CLUSTER";
/// A failed node launcher of a cluster job prints this line, then its
/// cause's name (launch::enum_names(FailureCause)), before its error line:
/// the cluster launcher names the host with the most telling cause.
inline constexpr const char* kCauseLinePrefix = "dlscale: cause: ";

}  // namespace dlscale::launch
