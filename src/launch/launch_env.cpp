#include "launch/launch_env.h"

#include <cstdlib>
#include <deque>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/hash.h"
#include "launch/launch_options.h"
#include "slurm/hostlist.h"

namespace dlscale::launch {

std::string to_string(LaunchKind kind) {
  switch (kind) {
    case LaunchKind::kStandalone: return "standalone";
    case LaunchKind::kSpawned: return "dlscale launcher";
    case LaunchKind::kMpirun: return "mpirun";
    case LaunchKind::kSrun: return "srun";
    case LaunchKind::kExternal:
      return "external launcher";
  }
  return "?";
}

namespace {

int read_int(const EnvLookup& env, const char* name, int fallback) {
  const char* v = env(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  // Slurm writes counts like "2(x3)": the leading integer is what we need.
  DLSCALE_CHECK(end != v && n >= 0 && n <= 1 << 24, "environment variable {}='{}' is not a count",
                name, v);
  return static_cast<int>(n);
}

/// A TCP port: 0 when unset or empty, else the leading integer ("12000-12003",
/// "12000,12005": a range's first), which must be in [1, 65535].
int read_port(const EnvLookup& env, const char* name) {
  const char* v = env(name);
  if (v == nullptr || *v == '\0') return 0;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  DLSCALE_CHECK(end != v && n >= 1 && n <= 65535, "environment variable {}='{}' is not a port (1 to 65535)", name,
                v);
  return static_cast<int>(n);
}

std::string read_string(const EnvLookup& env, const char* name) {
  const char* v = env(name);
  return v ? std::string(v) : std::string();
}

ClusterHost read_cluster(const EnvLookup& env) {
  ClusterHost c;
  const std::string v = read_string(env, kEnvCluster);
  if (v.empty()) return c;
  std::vector<std::string> parts;
  size_t pos = 0;
  while (true) {
    const size_t colon = v.find(':', pos);
    parts.push_back(v.substr(pos, colon == std::string::npos ? colon : colon - pos));
    if (colon == std::string::npos) break;
    pos = colon + 1;
  }
  char* end = nullptr;
  const bool ok = parts.size() >= 4 && parts.size() <= 7 && parts.size() != 5 && !parts[0].empty();
  if (ok) {
    c.name = parts[0];
    c.host = static_cast<int>(std::strtol(parts[1].c_str(), &end, 10));
    c.hosts = static_cast<int>(std::strtol(parts[2].c_str(), &end, 10));
    c.link_mbit = std::strtod(parts[3].c_str(), &end);
  }
  if (ok && parts.size() >= 6) {
    c.rack_hosts = static_cast<int>(std::strtol(parts[4].c_str(), &end, 10));
    c.uplink_mbit = std::strtod(parts[5].c_str(), &end);
  }
  if (ok && parts.size() == 7) c.tcp_cc = parts[6];
  DLSCALE_CHECK(ok && c.host >= 0 && c.host < c.hosts && c.link_mbit >= 0 && c.rack_hosts >= 0 &&
                    c.uplink_mbit >= 0,
                "environment variable {}='{}' is not "
                "NAME:HOST:HOSTS:LINK_MBIT[:RACK_HOSTS:UPLINK_MBIT[:TCP_CC]]",
                kEnvCluster, v);
  return c;
}

/// A worker of dlscale's own launcher.
bool read_spawned(const EnvLookup& env, LaunchEnv& e) {
  if (env(kEnvRank) == nullptr) return false;
  e.kind = LaunchKind::kSpawned;
  e.rank = read_int(env, kEnvRank, 0);
  e.world_size = read_int(env, kEnvWorldSize, 1);
  e.local_rank = read_int(env, kEnvLocalRank, e.rank);
  e.local_world_size = read_int(env, kEnvLocalWorldSize, e.world_size);
  e.master_addr = read_string(env, kEnvMasterAddr);
  e.master_port = read_port(env, kEnvMasterPort);
  e.status_fd = read_int(env, kEnvStatusFd, -1);
  return true;
}

/// A rank of Open MPI's mpirun.
bool read_mpirun(const EnvLookup& env, LaunchEnv& e) {
  if (env("OMPI_COMM_WORLD_SIZE") == nullptr) return false;
  e.kind = LaunchKind::kMpirun;
  e.rank = read_int(env, "OMPI_COMM_WORLD_RANK", 0);
  e.world_size = read_int(env, "OMPI_COMM_WORLD_SIZE", 1);
  e.local_rank = read_int(env, "OMPI_COMM_WORLD_LOCAL_RANK", 0);
  e.local_world_size = read_int(env, "OMPI_COMM_WORLD_LOCAL_SIZE", 1);
  e.master_addr = read_string(env, "MASTER_ADDR");
  e.master_port = read_port(env, "MASTER_PORT");
  return true;
}

/// Tasks of an srun step: counts, node, and where the step meets.
bool read_srun(const EnvLookup& env, LaunchEnv& e) {
  if (env("SLURM_PROCID") == nullptr || env("SLURM_STEP_NUM_TASKS") == nullptr) return false;
  e.kind = LaunchKind::kSrun;
  e.rank = read_int(env, "SLURM_PROCID", 0);
  e.world_size = read_int(env, "SLURM_STEP_NUM_TASKS", 1);
  e.local_rank = read_int(env, "SLURM_LOCALID", 0);
  e.local_world_size = read_int(env, "SLURM_STEP_TASKS_PER_NODE", 1);
  SlurmStep& s = e.slurm;
  s.job_id = read_string(env, "SLURM_JOB_ID");
  s.step_id = read_string(env, "SLURM_STEP_ID");
  s.nodelist = read_string(env, "SLURM_STEP_NODELIST");
  if (s.nodelist.empty()) s.nodelist = read_string(env, "SLURM_JOB_NODELIST");
  s.node_name = read_string(env, "SLURMD_NODENAME");
  s.node_id = read_int(env, "SLURM_NODEID", -1);
  s.pmix = env("PMIX_RANK") != nullptr;
  e.node_name = s.node_name;
  e.master_addr = read_string(env, "MASTER_ADDR");
  if (e.master_addr.empty() && !s.nodelist.empty()) {
    try {
      e.master_addr = slurm::first_host(s.nodelist);
    } catch (const Error& err) {
      throw Error(fmt::format("environment variable SLURM_STEP_NODELIST: {}", err.what()));
    }
  }
  e.master_port = read_port(env, "MASTER_PORT");
  // "12000-12003" or "12000,12005": the step's reserved ports (MpiParams=ports).
  if (e.master_port == 0) e.master_port = read_port(env, "SLURM_STEP_RESV_PORTS");
  if (e.master_port == 0 && !s.job_id.empty()) e.master_port = slurm_step_port(s.job_id, s.step_id);
  return true;
}

/// The rules, in the order they are tried; a deque, so that a registration
/// keeps the earlier ones where they were.
std::deque<LaunchRule>& rule_table() {
  static std::deque<LaunchRule> rules{{to_string(LaunchKind::kSpawned), read_spawned},
                                      {to_string(LaunchKind::kMpirun), read_mpirun},
                                      {to_string(LaunchKind::kSrun), read_srun}};
  return rules;
}

}  // namespace

void register_launch_rule(LaunchRule rule) {
  DLSCALE_CHECK(!rule.name.empty() && rule.detect != nullptr,
                "a launch rule needs a name and a detect");
  for (const LaunchRule& r : rule_table())
    DLSCALE_CHECK(r.name != rule.name, "launch rule '{}' is taken", rule.name);
  const auto detect = std::move(rule.detect);
  rule.detect = [detect](const EnvLookup& env, LaunchEnv& e) {
    if (!detect(env, e)) return false;
    e.kind = LaunchKind::kExternal;
    return true;
  };
  rule_table().push_back(std::move(rule));
}

std::string ClusterHost::env_value(const cluster::ClusterSpec& spec, int host) {
  return fmt::format("{}:{}:{}:{:g}:{}:{:g}:{}", spec.name, host, spec.hosts, spec.link_mbit,
                     spec.rack_hosts, spec.uplink_mbit, spec.tcp_cc);
}

nlohmann::json ClusterHost::to_json(int workers_per_host) const {
  return cluster::cluster_json(name, hosts, workers_per_host, link_mbit, rack_hosts, uplink_mbit,
                               tcp_cc);
}

int slurm_step_port(const std::string& job_id, const std::string& step_id) {
  const std::string key = job_id + "." + step_id;
  return kSlurmPortBase + static_cast<int>(fnv1a(key.data(), key.size()) % kSlurmPortSpan);
}

nlohmann::json SlurmStep::to_json() const {
  if (job_id.empty()) return nullptr;
  nlohmann::json nodes = nlohmann::json::array();
  try {
    for (const std::string& n : slurm::expand_hostlist(nodelist)) nodes.push_back(n);
  } catch (const Error&) {
    nodes = nullptr;  // read_srun accepted its first host; the record keeps the list as written
  }
  return {{"job_id", job_id}, {"step_id", step_id}, {"nodelist", nodelist}, {"nodes", nodes}};
}

LaunchEnv detect_launch_env(const EnvLookup& env) {
  LaunchEnv e;
  for (const LaunchRule& rule : rule_table()) {
    if (rule.detect(env, e)) {
      e.launcher = rule.name;
      break;
    }
    e = LaunchEnv{};  // a rule that declined leaves nothing behind
  }
  e.job_secret = read_string(env, kEnvJobSecret);
  e.cluster = read_cluster(env);
  // As --workers: more would wait out --timeout for peers that never come.
  DLSCALE_CHECK(
      e.world_size <= kMaxProcesses && e.local_world_size <= kMaxProcesses,
      "launch environment ({}) gives {} workers ({} on this node); dlscale runs at most {}",
      e.launcher, e.world_size, e.local_world_size, kMaxProcesses);
  DLSCALE_CHECK(e.world_size >= 1 && e.rank < e.world_size,
                "launch environment ({}) gives rank {} outside world size {}", e.launcher, e.rank,
                e.world_size);
  DLSCALE_CHECK(e.local_world_size >= 1 && e.local_rank < e.local_world_size,
                "launch environment ({}) gives local rank {} outside {} local workers", e.launcher,
                e.local_rank, e.local_world_size);
  return e;
}

}  // namespace dlscale::launch
