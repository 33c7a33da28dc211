// dlscale cluster up|down|list|exec: the emulated multi-host cluster
// (docs/cluster.md).
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>

#include "cli/commands.h"
#include "cluster/cluster.h"
#include "core/error.h"
#include "core/text_table.h"

namespace dlscale::cli {
namespace {

void run_up(const cluster::ClusterSpec& spec) {
  const cluster::UpOutcome outcome = cluster::cluster_up(spec);
  fmt::print("cluster '{}' {}: {}, addresses {} .. {}\n", spec.name,
             outcome == cluster::UpOutcome::kCreated ? "is up" : "was already up",
             cluster::describe(spec), cluster::host_address(0),
             cluster::host_address(spec.hosts - 1));
}

void run_down(const std::string& name) {
  const bool existed = cluster::cluster_down(name);
  fmt::print(existed ? "cluster '{}' removed\n" : "cluster '{}' did not exist\n", name);
}

void run_list() {
  TextTable table({"name", "hosts", "link", "state", "namespaces"},
                  {Align::kLeft, Align::kRight, Align::kLeft, Align::kLeft, Align::kLeft});
  for (const cluster::ClusterStatus& c : cluster::cluster_list()) {
    std::string names;
    for (const std::string& ns : c.namespaces) names += (names.empty() ? "" : " ") + ns;
    table.add_row({c.spec.name, c.spec.hosts > 0 ? std::to_string(c.spec.hosts) : "?",
                   c.spec.link_mbit > 0 ? fmt::format("{:g} Mbit/s", c.spec.link_mbit)
                                        : "unshaped",
                   c.complete ? "up" : "incomplete (cluster down removes it)", names});
  }
  table.print(std::cout);
}

[[noreturn]] void run_exec(const std::string& name, const std::string& host,
                           const std::vector<std::string>& command) {
  cluster::check_can_manage();
  const cluster::ClusterSpec spec = cluster::require_cluster(name);
  const int h = cluster::parse_host(spec, host);
  const char* what = "";
  if (const int err = cluster::enter_host(cluster::host_entry(name, h), &what); err != 0) {
    throw Error(fmt::format("cannot {} of host {} of cluster '{}': {}", what, h, name,
                            std::strerror(err)));
  }
  std::vector<char*> args;
  for (const std::string& a : command) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  ::execvp(args[0], args.data());
  const int err = errno;
  std::fprintf(stderr, "dlscale: error: cannot run '%s' on host %d: %s\n", command[0].c_str(), h,
               std::strerror(err));
  std::exit(err == ENOENT ? 127 : 126);
}

}  // namespace

void add_cluster_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "cluster", "An emulated multi-host cluster on this machine: network namespaces joined by "
                 "shaped links (needs root; docs/cluster.md)");
  cmd->require_subcommand(1);
  auto spec = std::make_shared<cluster::ClusterSpec>();
  auto name = std::make_shared<std::string>("dls");
  const std::string name_help = "The cluster's name (1 to 12 lower-case letters or digits)";

  CLI::App* up = cmd->add_subcommand(
      "up", "Create K hosts (network namespaces) with addresses 10.77.0.1 .. 10.77.0.K, joined "
            "through a bridge; does nothing when the cluster is already up as asked");
  up->add_option("--name", spec->name, name_help)->capture_default_str();
  up->add_option("--hosts", spec->hosts, "Hosts (network namespaces), 1 .. 64")
      ->capture_default_str();
  up->add_option("--link-mbit", spec->link_mbit,
                 "Each host's link rate in Mbit/s, each way (tbf); 0 = unshaped")
      ->capture_default_str();
  up->callback([spec] { run_up(*spec); });

  CLI::App* down = cmd->add_subcommand(
      "down", "Remove a cluster: its namespaces (killing what still runs in them), links, bridge "
              "and state; also cleans up after a crash");
  down->add_option("--name", *name, name_help)->capture_default_str();
  down->callback([name] { run_down(*name); });

  CLI::App* list = cmd->add_subcommand("list", "List the clusters on this machine");
  list->callback([] { run_list(); });

  auto host = std::make_shared<std::string>();
  auto command = std::make_shared<std::vector<std::string>>();
  CLI::App* exec = cmd->add_subcommand(
      "exec", "Run a command on one host: in its network namespace, with its host name");
  exec->add_option("--name", *name, name_help)->capture_default_str();
  exec->add_option("host", *host, "The host: its index (0 .. K-1), h<i>, name or address")
      ->required();
  exec->add_option("command", *command, "The command and its arguments (after --)")->required();
  exec->callback([name, host, command] { run_exec(*name, *host, *command); });
}

}  // namespace dlscale::cli
