#include "launch/launch_env.h"

#include <gtest/gtest.h>

#include <map>

#include "core/error.h"

namespace dlscale::launch {
namespace {

EnvLookup env_of(std::map<std::string, std::string> vars) {
  auto shared = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
  return [shared](const char* name) -> const char* {
    const auto it = shared->find(name);
    return it == shared->end() ? nullptr : it->second.c_str();
  };
}

TEST(LaunchEnv, ClusterJobCarriesTheTopology) {
  const LaunchEnv e = detect_launch_env(env_of({{"DLSCALE_CLUSTER", "net:2:4:100"}}));
  EXPECT_EQ(e.cluster.name, "net");
  EXPECT_EQ(e.cluster.host, 2);
  EXPECT_EQ(e.cluster.hosts, 4);
  EXPECT_EQ(e.cluster.link_mbit, 100);
  EXPECT_EQ(
      e.cluster.to_json(3).dump(),
      R"({"hosts":4,"link_mbit":100.0,"name":"net","rack_hosts":0,"uplink_mbit":0.0,"workers_per_host":3})");
  EXPECT_EQ(detect_launch_env(env_of({})).cluster.name, "");
  EXPECT_TRUE(cluster_json("", 0, 1, 0).is_null());
  // With racks: what the cluster launcher sets, read back whole.
  cluster::ClusterSpec racked;
  racked.name = "fab";
  racked.hosts = 4;
  racked.link_mbit = 100;
  racked.rack_hosts = 2;
  racked.uplink_mbit = 50;
  racked.tcp_cc = "bbr";
  EXPECT_EQ(ClusterHost::env_value(racked, 3), "fab:3:4:100:2:50:bbr");
  const LaunchEnv r =
      detect_launch_env(env_of({{"DLSCALE_CLUSTER", ClusterHost::env_value(racked, 3)}}));
  EXPECT_EQ(
      r.cluster.to_json(1).dump(),
      R"({"hosts":4,"link_mbit":100.0,"name":"fab","rack_hosts":2,"tcp_cc":"bbr","uplink_mbit":50.0,"workers_per_host":1})");
  // Without its congestion control (a launcher of before): the rest is read.
  EXPECT_EQ(detect_launch_env(env_of({{"DLSCALE_CLUSTER", "fab:3:4:100:2:50"}})).cluster.rack_hosts,
            2);
  for (const char* bad : {"net:4:4:100", "net:1:2", ":0:1:0", "net:0:2:-1", "net:0:2:1:2",
                          "net:0:2:1:-1:5", "net:0:2:1:1:-5"}) {
    try {
      detect_launch_env(env_of({{"DLSCALE_CLUSTER", bad}}));
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& err) {
      EXPECT_NE(std::string(err.what()).find("DLSCALE_CLUSTER"), std::string::npos) << bad;
    }
  }
}

TEST(LaunchEnv, StandaloneByDefault) {
  const LaunchEnv e = detect_launch_env(env_of({}));
  EXPECT_EQ(e.kind, LaunchKind::kStandalone);
  EXPECT_FALSE(e.is_worker());
  EXPECT_EQ(e.world_size, 1);
}

TEST(LaunchEnv, SpawnedByDlscale) {
  const LaunchEnv e = detect_launch_env(env_of({{"DLSCALE_RANK", "3"},
                                                {"DLSCALE_WORLD_SIZE", "4"},
                                                {"DLSCALE_LOCAL_RANK", "1"},
                                                {"DLSCALE_LOCAL_WORLD_SIZE", "2"},
                                                {"DLSCALE_MASTER_ADDR", "10.0.0.1"},
                                                {"DLSCALE_MASTER_PORT", "29500"},
                                                {"DLSCALE_STATUS_FD", "3"}}));
  EXPECT_EQ(e.kind, LaunchKind::kSpawned);
  EXPECT_EQ(e.rank, 3);
  EXPECT_EQ(e.world_size, 4);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.local_world_size, 2);
  EXPECT_EQ(e.master_addr, "10.0.0.1");
  EXPECT_EQ(e.master_port, 29500);
  EXPECT_EQ(e.status_fd, 3);
}

TEST(LaunchEnv, Mpirun) {
  const LaunchEnv e = detect_launch_env(env_of({{"OMPI_COMM_WORLD_RANK", "1"},
                                                {"OMPI_COMM_WORLD_SIZE", "2"},
                                                {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                                {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}}));
  EXPECT_EQ(e.kind, LaunchKind::kMpirun);
  EXPECT_EQ(e.rank, 1);
  EXPECT_EQ(e.world_size, 2);
  EXPECT_EQ(e.local_world_size, 2);
}

TEST(LaunchEnv, SrunReadsSlurmCounts) {
  const LaunchEnv e = detect_launch_env(env_of({{"SLURM_PROCID", "5"},
                                                {"SLURM_STEP_NUM_TASKS", "8"},
                                                {"SLURM_LOCALID", "1"},
                                                {"SLURM_STEP_TASKS_PER_NODE", "2(x4)"},
                                                {"MASTER_ADDR", "node01"},
                                                {"MASTER_PORT", "29400"}}));
  EXPECT_EQ(e.kind, LaunchKind::kSrun);
  EXPECT_EQ(e.rank, 5);
  EXPECT_EQ(e.world_size, 8);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.local_world_size, 2);
  EXPECT_EQ(e.master_addr, "node01");
  EXPECT_EQ(e.master_port, 29400);
}

TEST(LaunchEnv, SrunMeetsAtTheStepsFirstNode) {
  std::map<std::string, std::string> vars = {{"SLURM_PROCID", "3"},         {"SLURM_STEP_NUM_TASKS", "4"},
                                             {"SLURM_LOCALID", "1"},        {"SLURM_STEP_TASKS_PER_NODE", "2(x2)"},
                                             {"SLURM_JOB_ID", "42"},        {"SLURM_STEP_ID", "0"},
                                             {"SLURM_NODEID", "1"},         {"SLURMD_NODENAME", "n7"},
                                             {"SLURM_STEP_NODELIST", "n[3,7]"}};
  LaunchEnv e = detect_launch_env(env_of(vars));
  EXPECT_EQ(e.master_addr, "n3");
  EXPECT_EQ(e.master_port, slurm_step_port("42", "0"));
  EXPECT_GE(e.master_port, kSlurmPortBase);
  EXPECT_LT(e.master_port, kSlurmPortBase + kSlurmPortSpan);
  EXPECT_NE(slurm_step_port("42", "0"), slurm_step_port("42", "1"));
  EXPECT_EQ(e.node_name, "n7");
  EXPECT_EQ(e.slurm.node_id, 1);
  EXPECT_EQ(e.slurm.to_json().dump(),
            R"({"job_id":"42","nodelist":"n[3,7]","nodes":["n3","n7"],"step_id":"0"})");
  vars["SLURM_STEP_RESV_PORTS"] = "12000-12003";
  EXPECT_EQ(detect_launch_env(env_of(vars)).master_port, 12000);
  vars["MASTER_ADDR"] = "10.0.0.9";
  vars["MASTER_PORT"] = "29400";
  e = detect_launch_env(env_of(vars));
  EXPECT_EQ(e.master_addr, "10.0.0.9");
  EXPECT_EQ(e.master_port, 29400);
  vars["SLURM_STEP_NODELIST"] = "n[3,7";
  vars.erase("MASTER_ADDR");
  try {
    detect_launch_env(env_of(vars));
    ADD_FAILURE() << "a malformed node list was accepted";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("SLURM_STEP_NODELIST"), std::string::npos) << err.what();
  }
  EXPECT_TRUE(detect_launch_env(env_of({})).slurm.to_json().is_null());
}

TEST(LaunchEnv, SbatchWithoutStepIsStandalone) {
  // A batch script has SLURM_PROCID but is not a task of a job step.
  EXPECT_EQ(detect_launch_env(env_of({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}})).kind,
            LaunchKind::kStandalone);
}

TEST(LaunchEnv, MalformedValuesAreNamed) {
  try {
    detect_launch_env(env_of({{"DLSCALE_RANK", "x"}}));
    FAIL() << "expected dlscale::Error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "environment variable DLSCALE_RANK='x' is not a count");
  }
  EXPECT_THROW(detect_launch_env(env_of({{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "2"}})),
               Error);
}

/// The one-line error of detect_launch_env on `vars`, or "".
std::string env_error(const std::map<std::string, std::string>& vars) {
  try {
    detect_launch_env(env_of(vars));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A world larger than --workers allows waited out the whole --timeout for
// peers that never came (exit 5); a port 0 was taken (issue 42).
TEST(LaunchEnv, WorldsBeyondTheWorkerCapAndPortsOutsideTheRangeAreRefusedAtOnce) {
  const std::map<std::string, std::string> srun = {{"SLURM_PROCID", "0"}, {"SLURM_STEP_NUM_TASKS", "2000000"},
                                                   {"SLURM_JOB_ID", "7"}, {"SLURM_STEP_ID", "0"}};
  EXPECT_EQ(env_error(srun), "launch environment (srun) gives 2000000 workers (1 on this node); dlscale runs at most "
                             "1024");
  EXPECT_NE(env_error({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                       {"OMPI_COMM_WORLD_LOCAL_SIZE", "5000"}}).find("dlscale runs at most 1024"),
            std::string::npos);
  std::map<std::string, std::string> ok = srun;
  ok["SLURM_STEP_NUM_TASKS"] = "1024";
  EXPECT_EQ(env_error(ok), "");
  for (const std::string port : {"0", "0-3", "65536", "x", "-1"}) {
    std::map<std::string, std::string> v = ok;
    v["SLURM_STEP_RESV_PORTS"] = port;
    EXPECT_EQ(env_error(v), "environment variable SLURM_STEP_RESV_PORTS='" + port + "' is not a port (1 to 65535)");
    v.erase("SLURM_STEP_RESV_PORTS");
    v["MASTER_PORT"] = port;
    EXPECT_EQ(env_error(v), "environment variable MASTER_PORT='" + port + "' is not a port (1 to 65535)");
  }
  ok["SLURM_STEP_RESV_PORTS"] = "";
  EXPECT_EQ(detect_launch_env(env_of(ok)).master_port, slurm_step_port("7", "0"));  // empty: not given
}

}  // namespace
}  // namespace dlscale::launch
