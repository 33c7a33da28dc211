// The emulated cluster's parts that need no root: names, addresses, checks,
// the sweep's cluster launcher and
// the CLI's refusals. The cluster itself is exercised, as root, by
// tests/cluster/cluster_drills_test.cpp (ctest label `cluster`).
#include "cluster/cluster.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "core/files.h"
#include "process_util.h"
#include "sweep/planner.h"
#include "sweep/runner.h"

namespace dlscale {
namespace {

using testing::error_of;

TEST(Cluster, SpecChecksNameEveryBadValue) {
  cluster::ClusterSpec s;
  EXPECT_EQ(error_of([&] { cluster::check_cluster_spec(s); }), "");
  s.name = "Bad-Name";
  EXPECT_NE(error_of([&] { cluster::check_cluster_spec(s); }).find("cluster name 'Bad-Name'"),
            std::string::npos);
  s.name = "abcdefghijklm";  // 13 characters
  EXPECT_NE(error_of([&] { cluster::check_cluster_spec(s); }).find("1 to 12"), std::string::npos);
  s.name = "ok";
  s.hosts = 65;
  EXPECT_NE(error_of([&] { cluster::check_cluster_spec(s); }).find("--hosts must be in [1, 64] (got 65)"),
            std::string::npos);
  s.hosts = 2;
  s.link_mbit = 0.5;
  EXPECT_NE(error_of([&] { cluster::check_cluster_spec(s); }).find("--link-mbit"), std::string::npos);
  s.link_mbit = 100;
  EXPECT_EQ(cluster::describe(s), "2 hosts, links of 100 Mbit/s each way, TCP cubic");
  s.link_mbit = 0;
  s.hosts = 1;
  EXPECT_EQ(cluster::describe(s), "1 host, unshaped links, TCP cubic");
  s.tcp_cc = "";  // the state of a cluster made before dlscale set it
  EXPECT_EQ(cluster::describe(s), "1 host, unshaped links, TCP as the machine's default was");
}

TEST(Cluster, TcpCongestionControlIsCubicUnlessAskedAndBadNamesAreRefused) {
  cluster::ClusterSpec s;
  EXPECT_EQ(s.tcp_cc, "cubic");  // Linux's default, whatever this machine's is
  cluster::ClusterSpec other = s;
  other.tcp_cc = "bbr";
  EXPECT_FALSE(other == s);  // `up` refuses to change a cluster that is up
  EXPECT_EQ(error_of([&] { cluster::check_cluster_spec(other); }), "");
  other.tcp_cc = "system";
  EXPECT_EQ(error_of([&] { cluster::check_cluster_spec(other); }), "");
  for (const char* bad : {"", "Cubic", "bbr;reboot", "../x", "a_name_of_16_chr"}) {
    other.tcp_cc = bad;
    EXPECT_NE(error_of([&] {
                cluster::check_cluster_spec(other);
              }).find(fmt::format("--tcp-cc '{}' must be a congestion control's name", bad)),
              std::string::npos)
        << bad;
  }
  // What the machine offers: a cubic cluster needs cubic, which every
  // Debian kernel builds in; the default is always among them.
  const std::vector<std::string> offered = cluster::available_tcp_ccs();
  EXPECT_NE(std::find(offered.begin(), offered.end(), cluster::system_tcp_cc()), offered.end());
  other.tcp_cc = "system";
  EXPECT_EQ(cluster::resolve_tcp_cc(other).tcp_cc, cluster::system_tcp_cc());
  other.tcp_cc = "nosuchcc";
  EXPECT_NE(error_of([&] {
              cluster::resolve_tcp_cc(other);
            }).find("--tcp-cc 'nosuchcc' is not available on this machine (available: "),
            std::string::npos);
  EXPECT_EQ(cluster::cluster_json("f", 2, 1, 0, 0, 0, "bbr").at("tcp_cc"), "bbr");
  EXPECT_FALSE(cluster::cluster_json("f", 2, 1, 0).contains("tcp_cc"));  // not known
}

std::vector<sweep::PlannedRun> plan(const std::string& yaml) {
  return sweep::plan_sweep(sweep::parse_sweep(yaml, "test.yaml"), {});
}

/// What planning `yaml` throws; "" when it plans.
std::string plan_error(const std::string& yaml) {
  return error_of([&] { plan(yaml); });
}

TEST(Cluster, RacksShareAnUplinkAndBadRacksAreRefused) {
  cluster::ClusterSpec s;
  s.hosts = 5;
  s.link_mbit = 100;
  s.rack_hosts = 2;
  s.uplink_mbit = 50;
  EXPECT_EQ(error_of([&] { cluster::check_cluster_spec(s); }), "");
  EXPECT_EQ(s.racks(), 3);  // hosts 0-1, 2-3 and 4
  EXPECT_EQ(
      cluster::describe(s),
      "5 hosts, links of 100 Mbit/s each way, racks of 2 hosts with uplinks of 50 Mbit/s, TCP "
      "cubic");
  s.uplink_mbit = 0;
  EXPECT_EQ(
      cluster::describe(s),
      "5 hosts, links of 100 Mbit/s each way, racks of 2 hosts with unshaped uplinks, TCP cubic");
  cluster::ClusterSpec other = s;
  other.uplink_mbit = 25;
  EXPECT_FALSE(other == s);  // `up` refuses to reshape a cluster that is up
  auto bad = [&](int rack_hosts, double uplink, const std::string& needle) {
    s.rack_hosts = rack_hosts;
    s.uplink_mbit = uplink;
    EXPECT_NE(error_of([&] { cluster::check_cluster_spec(s); }).find(needle), std::string::npos)
        << rack_hosts << " " << uplink;
  };
  bad(5, 10, "--rack-hosts must be 0 (one switch) or in [1, --hosts - 1] = [1, 4] (got 5)");
  bad(-1, 10, "--rack-hosts must be 0");
  bad(2, 0.5, "--uplink-mbit must be 0 (unshaped) or in [1, 100000] Mbit/s (got 0.5)");
  bad(0, 10, "--uplink-mbit needs --rack-hosts");
  EXPECT_EQ(
      cluster::cluster_json("f", 4, 1, 100, 2, 50).dump(),
      R"({"hosts":4,"link_mbit":100.0,"name":"f","rack_hosts":2,"uplink_mbit":50.0,"workers_per_host":1})");
}

TEST(Cluster, SweepRacksNameTheirClusterAndStayOutOfTheCommand) {
  const auto runs = plan(R"Y(
parameters: {model: lenet, batch: 8, launcher: cluster, hosts: 4, link-mbit: 100}
variables:
  rack-hosts: [2]
  uplink-mbit: [0, 50]
)Y");
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(sweep::param_text(runs[0].params, "cluster"), "s4l100r2uu");
  EXPECT_EQ(sweep::param_text(runs[1].params, "cluster"), "s4l100r2u50");
  std::string joined;
  for (const std::string& a : sweep::build_command(runs[1].params, "dlscale", "r.json"))
    joined += a + " ";
  EXPECT_NE(joined.find("--cluster s4l100r2u50 "), std::string::npos) << joined;
  EXPECT_EQ(joined.find("rack"), std::string::npos) << joined;
  EXPECT_EQ(joined.find("uplink"), std::string::npos) << joined;
  // A name past 12 characters becomes 'f' and 11 hex digits of it.
  const auto wide = plan(
      "parameters: {model: lenet, batch: 8, launcher: cluster, hosts: 64, link-mbit: 100000, "
      "rack-hosts: 32, uplink-mbit: 50000}");
  const std::string name = sweep::param_text(wide[0].params, "cluster");
  EXPECT_EQ(name.size(), 12u) << name;
  EXPECT_EQ(name[0], 'f') << name;
  EXPECT_EQ(error_of([&] { cluster::check_cluster_name(name); }), "");
  EXPECT_NE(
      plan_error("parameters: {model: lenet, batch: 8, launcher: cluster, hosts: 4, rack-hosts: 4}")
          .find("parameter 'rack-hosts' must be 0 (one switch) or a whole number in [1, "
                "hosts - 1 = 3]"),
      std::string::npos);
  EXPECT_NE(
      plan_error(
          "parameters: {model: lenet, batch: 8, launcher: cluster, hosts: 4, rack-hosts: 1.5}")
          .find("parameter 'rack-hosts'"),
      std::string::npos);
  EXPECT_NE(
      plan_error(
          "parameters: {model: lenet, batch: 8, launcher: cluster, hosts: 4, uplink-mbit: 10}")
          .find("parameter 'uplink-mbit' needs 'rack-hosts'"),
      std::string::npos);
  EXPECT_NE(
      plan_error("parameters: {model: lenet, batch: 8, launcher: cluster, hosts: 4, rack-hosts: 2, "
                 "uplink-mbit: 0.2}")
          .find(
              "parameter 'uplink-mbit' must be 0 (unshaped) or Mbit/s in [1, 100000] (got '0.2')"),
      std::string::npos);
  EXPECT_NE(plan_error("parameters: {model: lenet, batch: 8, launcher: slurm, rack-hosts: 2}")
                .find("parameter 'rack-hosts' is for launcher cluster, not slurm"),
            std::string::npos);
}

TEST(Cluster, SweepTcpCcNamesItsClusterAndStaysOutOfTheCommand) {
  const auto runs = plan(R"Y(
parameters: {model: lenet, batch: 8, launcher: cluster, hosts: 4, link-mbit: 100}
variables:
  tcp-cc: [cubic, bbr]
)Y");
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(sweep::param_text(runs[0].params, "cluster"), "s4l100");  // the default keeps its name
  EXPECT_EQ(sweep::param_text(runs[1].params, "cluster"), "s4l100cbbr");
  std::string joined;
  for (const std::string& a : sweep::build_command(runs[1].params, "dlscale", "r.json"))
    joined += a + " ";
  EXPECT_EQ(joined.find("tcp"), std::string::npos) << joined;
  EXPECT_EQ(
      sweep::param_text(plan("parameters: {model: lenet, batch: 8, launcher: cluster}")[0].params,
                        "tcp-cc"),
      "cubic");
  EXPECT_NE(plan_error("parameters: {model: lenet, batch: 8, launcher: cluster, tcp-cc: 'BBR'}")
                .find("parameter 'tcp-cc': --tcp-cc 'BBR' must be a congestion control's name"),
            std::string::npos);
  EXPECT_NE(plan_error("parameters: {model: lenet, batch: 8, launcher: cluster, tcp-cc: 3}")
                .find("parameter 'tcp-cc' must be a congestion control's name (got '3')"),
            std::string::npos);
  EXPECT_NE(plan_error("parameters: {model: lenet, batch: 8, launcher: slurm, tcp-cc: bbr}")
                .find("parameter 'tcp-cc' is for launcher cluster, not slurm"),
            std::string::npos);
}

TEST(Cluster, HostNamesAddressesAndParsing) {
  EXPECT_EQ(cluster::host_namespace("net", 3), "dls-net-h3");
  EXPECT_EQ(cluster::switch_namespace("net"), "dls-net-sw");
  EXPECT_EQ(cluster::host_address(0), "10.77.0.1");
  EXPECT_EQ(cluster::host_address(63), "10.77.0.64");
  EXPECT_EQ(cluster::host_name("net", 2), "net-h2");
  EXPECT_EQ(cluster::host_entry("net", 1).netns_path, "/run/netns/dls-net-h1");
  cluster::ClusterSpec s;
  s.name = "net";
  s.hosts = 4;
  for (const char* text : {"2", "h2", "net-h2", "10.77.0.3"}) {
    EXPECT_EQ(cluster::parse_host(s, text), 2) << text;
  }
  EXPECT_NE(error_of([&] { cluster::parse_host(s, "4"); }).find("cluster 'net' has no host '4'; hosts are 0..3"),
            std::string::npos);
  EXPECT_NE(error_of([&] { cluster::parse_host(s, "10.77.0.5"); }), "");
}

TEST(Cluster, SweepLauncherDerivesWorkersAndNamesTheCluster) {
  const auto runs = plan(R"Y(
parameters: {model: lenet, batch: 8, launcher: cluster, workers-per-host: 2}
variables:
  hosts: [2, 4]
  link-mbit: [100, 0]
)Y");
  ASSERT_EQ(runs.size(), 4u);
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"4", "s2l100"}, {"4", "s2lu"}, {"8", "s4l100"}, {"8", "s4lu"}};
  for (size_t i = 0; i < runs.size(); ++i) {
    EXPECT_EQ(sweep::param_text(runs[i].params, "workers"), expected[i].first);
    EXPECT_EQ(sweep::param_text(runs[i].params, "cluster"), expected[i].second);
    EXPECT_EQ(sweep::param_text(runs[i].params, "global-batch"),
              std::to_string(8 * std::stoi(expected[i].first)));
  }
  // The command: --cluster and --workers-per-host, never --workers (the
  // cluster launcher refuses it); hosts and link-mbit are the sweep's own.
  const std::vector<std::string> argv = sweep::build_command(runs[0].params, "dlscale", "r.json");
  std::string joined;
  for (const std::string& a : argv) joined += a + " ";
  EXPECT_NE(joined.find("--cluster s2l100 "), std::string::npos) << joined;
  EXPECT_NE(joined.find("--workers-per-host 2 "), std::string::npos) << joined;
  EXPECT_EQ(joined.find("--workers "), std::string::npos) << joined;
  EXPECT_EQ(joined.find("--hosts"), std::string::npos) << joined;
  EXPECT_EQ(joined.find("--link-mbit"), std::string::npos) << joined;
}

TEST(Cluster, MpirunAcrossTheHosts) {
  cluster::ClusterSpec spec;
  spec.name = "lab";
  spec.hosts = 3;
  cluster::MpirunOptions o;
  o.workers_per_host = 2;
  o.agent = "/bin/dlscale cluster agent --name lab";
  o.extra = {"--bind-to", "none"};
  o.command = {"dlscale", "train"};
  const std::vector<std::string> argv = cluster::mpirun_command(spec, o);
  std::string joined;
  for (const std::string& a : argv) joined += a + "|";
  EXPECT_EQ(joined.rfind("mpirun|-np|6|--host|10.77.0.1:2,10.77.0.2:2,10.77.0.3:2|--oversubscribe|", 0), 0u)
      << joined;
  EXPECT_NE(joined.find("|--mca|plm_rsh_agent|/bin/dlscale cluster agent --name lab|"), std::string::npos);
  EXPECT_NE(joined.find("|--mca|btl_tcp_if_include|10.77.0.0/24|"), std::string::npos);
  EXPECT_NE(joined.find("|--mca|oob_tcp_if_include|10.77.0.0/24|"), std::string::npos);
  EXPECT_NE(joined.find("|-x|DLSCALE_JOB_SECRET|--bind-to|none|dlscale|train|"), std::string::npos) << joined;

  // The sweep: cluster-launcher mpirun runs `dlscale cluster mpirun ... -- dlscale train ...`.
  const auto runs = plan(R"Y(
parameters: {model: lenet, batch: 8, launcher: cluster, hosts: 2, cluster-launcher: mpirun,
             launcher-args: '--bind-to none'}
)Y");
  ASSERT_EQ(runs.size(), 1u);
  const std::vector<std::string> cmd = sweep::build_command(runs[0].params, "dlscale", "r.json");
  joined.clear();
  for (const std::string& a : cmd) joined += a + " ";
  EXPECT_EQ(joined.rfind("dlscale cluster mpirun --name s2lu --workers-per-host 1 --mpirun-args --bind-to none -- "
                         "dlscale train ",
                         0),
            0u)
      << joined;
  EXPECT_EQ(joined.find("--cluster "), std::string::npos) << joined;
  EXPECT_NE(error_of([] {
              plan("parameters: {model: lenet, batch: 8, launcher: cluster, cluster-launcher: ssh}");
            }).find("cluster-launcher"),
            std::string::npos);
}

TEST(Cluster, SweepLauncherRefusesContradictions) {
  EXPECT_NE(
      plan_error("parameters: {model: lenet, batch: 8, launcher: cluster, hosts: 2, workers: 3}")
          .find("parameter 'workers' is 3 but launcher cluster runs hosts x workers-per-host = 2"),
      std::string::npos);
  EXPECT_NE(plan_error("parameters: {model: lenet, batch: 8, launcher: cluster, cluster: mine}")
                .find("parameter 'cluster' is set"),
            std::string::npos);
  EXPECT_NE(plan_error("parameters: {model: lenet, batch: 8, launcher: cluster, link-mbit: fast}")
                .find("parameter 'link-mbit'"),
            std::string::npos);
  EXPECT_NE(
      plan_error("parameters: {model: lenet, batch: 8, launcher: cluster, launcher-args: '-v'}")
          .find("needs cluster-launcher: mpirun"),
      std::string::npos);
  EXPECT_NE(plan_error("parameters: {model: lenet, batch: 8, launcher: cluster, hosts: 65}")
                .find("parameter 'hosts' must be a whole number in [1, 64]"),
            std::string::npos);
}

TEST(Cluster, TrainRefusesFlagsTheClusterSetsItself) {
  for (const char* flag : {"--workers 2", "--nnodes 2", "--node-rank 0", "--master-addr 10.0.0.1",
                           "--host-addr=10.0.0.2"}) {
    const std::string err = testing::fails(
        std::string("train --model lenet --batch 4 --steps 5 --cluster nosuch ") + flag);
    EXPECT_NE(err.find("cannot be given with --cluster"), std::string::npos) << flag << ": " << err;
  }
  // Not up (as root) or not allowed (otherwise): one line, exit 2 either way.
  const std::string err = testing::fails("train --model lenet --batch 4 --steps 5 --cluster nosuch");
  EXPECT_TRUE(err.find("cluster 'nosuch' is not up") != std::string::npos ||
              err.find("needs root") != std::string::npos)
      << err;
  EXPECT_NE(testing::fails("cluster up --hosts 0").find("--hosts must be in [1, 64] (got 0)"),
            std::string::npos);
  EXPECT_NE(testing::fails("cluster up --name UP").find("cluster name 'UP'"), std::string::npos);
}

// A name that is a path never reaches the file system: `cluster down --name
// '../../../tmp/victim'` once deleted /tmp/victim.json as root and said
// "removed". Every command that takes a name applies up's rule first and
// exits 2, as root or not, before touching anything.
TEST(Cluster, EveryCommandRefusesANameThatIsAPath) {
  const std::string victim = testing::temp_path("victim");
  write_file_atomic(victim + ".json", "{\"name\":\"x\",\"hosts\":2}\n");
  const std::string rel = "../../.." + victim;  // from /run/dlscale/clusters
  for (const std::string& name : {rel, std::string("a/b"), std::string(".."), std::string("")}) {
    for (const std::string& cmd :
         {"cluster down --name '" + name + "'", "cluster exec --name '" + name + "' 0 -- true",
          "cluster mpirun --name '" + name + "' -- true",
          "cluster agent --name '" + name + "' 0 true",
          "train --model lenet --batch 4 --steps 2 --cluster '" + name + "'"}) {
      if (name.empty() && cmd.rfind("train", 0) == 0) continue;  // --cluster '' = no cluster
      const std::string err = testing::fails(cmd);
      EXPECT_NE(err.find("must be 1 to 12 lower-case letters or digits"), std::string::npos)
          << cmd << ": " << err;
      EXPECT_TRUE(std::filesystem::exists(victim + ".json")) << cmd;
    }
  }
  std::filesystem::remove(victim + ".json");
  for (const std::string& bad : {rel, std::string("a/b"), std::string("Up")}) {
    EXPECT_NE(error_of([&] { cluster::cluster_down(bad); }).find("cluster name"), std::string::npos);
    EXPECT_NE(error_of([&] { cluster::find_cluster(bad); }).find("cluster name"), std::string::npos);
    EXPECT_NE(error_of([&] { cluster::host_entry(bad, 0); }).find("cluster name"), std::string::npos);
  }
}

}  // namespace
}  // namespace dlscale
