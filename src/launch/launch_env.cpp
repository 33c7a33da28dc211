#include "launch/launch_env.h"

#include <cstdlib>
#include <string>
#include <vector>

#include "core/error.h"

namespace dlscale::launch {

std::string to_string(LaunchKind kind) {
  switch (kind) {
    case LaunchKind::kStandalone: return "standalone";
    case LaunchKind::kSpawned: return "dlscale launcher";
    case LaunchKind::kMpirun: return "mpirun";
    case LaunchKind::kSrun: return "srun";
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
  const bool ok = parts.size() == 4 && !parts[0].empty();
  if (ok) {
    c.name = parts[0];
    c.host = static_cast<int>(std::strtol(parts[1].c_str(), &end, 10));
    c.hosts = static_cast<int>(std::strtol(parts[2].c_str(), &end, 10));
    c.link_mbit = std::strtod(parts[3].c_str(), &end);
  }
  DLSCALE_CHECK(ok && c.host >= 0 && c.host < c.hosts && c.link_mbit >= 0,
                "environment variable {}='{}' is not NAME:HOST:HOSTS:LINK_MBIT", kEnvCluster, v);
  return c;
}

}  // namespace

LaunchEnv detect_launch_env(const EnvLookup& env) {
  LaunchEnv e;
  if (env(kEnvRank) != nullptr) {
    e.kind = LaunchKind::kSpawned;
    e.rank = read_int(env, kEnvRank, 0);
    e.world_size = read_int(env, kEnvWorldSize, 1);
    e.local_rank = read_int(env, kEnvLocalRank, e.rank);
    e.local_world_size = read_int(env, kEnvLocalWorldSize, e.world_size);
    e.master_addr = read_string(env, kEnvMasterAddr);
    e.master_port = read_int(env, kEnvMasterPort, 0);
    e.status_fd = read_int(env, kEnvStatusFd, -1);
  } else if (env("OMPI_COMM_WORLD_SIZE") != nullptr) {
    e.kind = LaunchKind::kMpirun;
    e.rank = read_int(env, "OMPI_COMM_WORLD_RANK", 0);
    e.world_size = read_int(env, "OMPI_COMM_WORLD_SIZE", 1);
    e.local_rank = read_int(env, "OMPI_COMM_WORLD_LOCAL_RANK", 0);
    e.local_world_size = read_int(env, "OMPI_COMM_WORLD_LOCAL_SIZE", 1);
  } else if (env("SLURM_PROCID") != nullptr && env("SLURM_STEP_NUM_TASKS") != nullptr) {
    e.kind = LaunchKind::kSrun;
    e.rank = read_int(env, "SLURM_PROCID", 0);
    e.world_size = read_int(env, "SLURM_STEP_NUM_TASKS", 1);
    e.local_rank = read_int(env, "SLURM_LOCALID", 0);
    e.local_world_size = read_int(env, "SLURM_STEP_TASKS_PER_NODE", 1);
  }
  if (e.kind == LaunchKind::kMpirun || e.kind == LaunchKind::kSrun) {
    e.master_addr = read_string(env, "MASTER_ADDR");
    e.master_port = read_int(env, "MASTER_PORT", 0);
  }
  e.job_secret = read_string(env, kEnvJobSecret);
  e.cluster = read_cluster(env);
  DLSCALE_CHECK(e.world_size >= 1 && e.rank < e.world_size,
                "launch environment ({}) gives rank {} outside world size {}", to_string(e.kind),
                e.rank, e.world_size);
  DLSCALE_CHECK(e.local_world_size >= 1 && e.local_rank < e.local_world_size,
                "launch environment ({}) gives local rank {} outside {} local workers",
                to_string(e.kind), e.local_rank, e.local_world_size);
  return e;
}

}  // namespace dlscale::launch
