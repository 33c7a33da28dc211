// dlscale cluster up|down|list|exec: the emulated multi-host cluster
// (docs/cluster.md).
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "cli/commands.h"
#include "cluster/cluster.h"
#include "core/child_process.h"
#include "core/error.h"
#include "core/text.h"
#include "core/text_table.h"
#include "launch/launch_env.h"
#include "launch/local_launcher.h"
#include "slurm/slurm_cluster.h"
#include "sweep/runner.h"

namespace dlscale::cli {
namespace {

void run_up(const cluster::ClusterSpec& asked) {
  const cluster::UpResult up = cluster::cluster_up(asked, slurm::start_slurm);
  const cluster::ClusterSpec& spec = up.spec;  // "system" resolved to its name
  fmt::print("cluster '{}' {}: {}, addresses {} .. {}\n", spec.name,
             up.outcome == cluster::UpOutcome::kCreated ? "is up" : "was already up",
             cluster::describe(spec), cluster::host_address(0),
             cluster::host_address(spec.hosts - 1));
}

void run_down(const std::string& name) {
  const bool existed = cluster::cluster_down(name);
  fmt::print(existed ? "cluster '{}' removed\n" : "cluster '{}' did not exist\n", name);
}

/// "100 Mbit/s", "unshaped", then ", racks of 2, uplinks 50 Mbit/s".
std::string links_text(const cluster::ClusterSpec& s) {
  const auto rate = [](double mbit) {
    return mbit > 0 ? fmt::format("{:g} Mbit/s", mbit) : std::string("unshaped");
  };
  if (s.rack_hosts == 0) return rate(s.link_mbit);
  return fmt::format("{}, racks of {}, uplinks {}", rate(s.link_mbit), s.rack_hosts,
                     rate(s.uplink_mbit));
}

void run_list() {
  TextTable table({"name", "hosts", "link", "tcp", "state", "slurm", "namespaces"},
                  {Align::kLeft, Align::kRight, Align::kLeft, Align::kLeft, Align::kLeft,
                   Align::kLeft, Align::kLeft});
  for (const cluster::ClusterStatus& c : cluster::cluster_list()) {
    table.add_row({c.spec.name, c.spec.hosts > 0 ? std::to_string(c.spec.hosts) : "?",
                   links_text(c.spec), c.spec.tcp_cc.empty() ? "?" : c.spec.tcp_cc,
                   c.complete ? "up" : "incomplete (cluster down removes it)",
                   c.spec.slurm ? slurm::slurm_state(c.spec.name) : "-", join(c.namespaces, " ")});
  }
  table.print(std::cout);
}

/// This program's own path, for the remote-shell agent's command line.
std::string self_path() {
  std::error_code ec;
  const std::filesystem::path path = std::filesystem::canonical(self_executable(), ec);
  DLSCALE_CHECK(!ec, "cannot find this program's path: {}", ec.message());
  return path.string();
}

/// Enters host `h` and replaces this process by `argv`.
[[noreturn]] void exec_on_host(const std::string& name, int h, const std::vector<std::string>& argv) {
  const char* what = "";
  if (const int err = cluster::enter_host(cluster::host_entry(name, h), &what); err != 0) {
    throw Error(fmt::format("cannot {} of host {} of cluster '{}': {}", what, h, name,
                            std::strerror(err)));
  }
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  ::execvp(args[0], args.data());
  const int err = errno;
  std::fprintf(stderr, "dlscale: error: cannot run '%s' on host %d: %s\n", argv[0].c_str(), h,
               std::strerror(err));
  std::exit(err == ENOENT ? 127 : 126);
}

/// Open MPI's remote-shell agent: `AGENT HOST WORDS...` runs WORDS through
/// the shell on HOST, as `ssh HOST WORDS...` would.
[[noreturn]] void run_agent(const std::string& name, const std::vector<std::string>& rest) {
  cluster::check_cluster_name(name);
  DLSCALE_CHECK(rest.size() >= 2, "cluster agent needs a host and a command (it is Open MPI's "
                                  "remote-shell agent; see docs/cluster.md)");
  const cluster::ClusterSpec spec = cluster::require_cluster(name);
  std::string command;
  for (size_t i = 1; i < rest.size(); ++i) command += (i > 1 ? " " : "") + rest[i];
  exec_on_host(name, cluster::parse_host(spec, rest[0]), {"/bin/sh", "-c", command});
}

[[noreturn]] void run_mpirun(const std::string& name, cluster::MpirunOptions options,
                             const std::string& extra) {
  cluster::check_cluster_name(name);
  cluster::check_can_manage();
  const cluster::ClusterSpec spec = cluster::require_cluster(name);
  options.agent = self_path() + " cluster agent --name " + name;
  if (!extra.empty()) options.extra = sweep::split_command(extra);
  // One secret for every rank (Gloo under mpirun meets at a store).
  if (const char* s = std::getenv(launch::kEnvJobSecret); s == nullptr || *s == '\0') {
    ::setenv(launch::kEnvJobSecret, launch::random_job_secret().c_str(), 1);
  }
  exec_on_host(name, 0, cluster::mpirun_command(spec, options));
}

[[noreturn]] void run_exec(const std::string& name, const std::string& host,
                           const std::vector<std::string>& command) {
  cluster::check_cluster_name(name);
  cluster::check_can_manage();
  const cluster::ClusterSpec spec = cluster::require_cluster(name);
  // Slurm's commands (sinfo, srun, sbatch) find the cluster's Slurm.
  for (const auto& [var, value] : slurm::slurm_client_env(name)) ::setenv(var.c_str(), value.c_str(), 1);
  exec_on_host(name, cluster::parse_host(spec, host), command);
}

/// `cluster up` and its flags.
void add_up_command(CLI::App& cmd, const std::string& name_help) {
  auto spec = std::make_shared<cluster::ClusterSpec>();
  CLI::App* up = cmd.add_subcommand(
      "up",
      "Create K hosts (network namespaces) with addresses 10.77.0.1 .. 10.77.0.K, joined "
      "through a bridge; does nothing when the cluster is already up as asked");
  up->add_option("--name", spec->name, name_help)->capture_default_str();
  up->add_option("--hosts", spec->hosts, "Hosts (network namespaces), 1 .. 64")
      ->capture_default_str();
  up->add_option("--link-mbit", spec->link_mbit,
                 "Each host's link rate in Mbit/s, each way (tbf); 0 = unshaped")
      ->capture_default_str();
  up->add_option(
        "--rack-hosts", spec->rack_hosts,
        "A shared fabric: hosts in racks of this many (host h in rack h / N), each rack's switch "
        "joined to a spine by one uplink that all its cross-rack traffic shares; 0 = one switch")
      ->capture_default_str();
  up->add_option("--uplink-mbit", spec->uplink_mbit,
                 "--rack-hosts: each rack's uplink rate in Mbit/s, each way (tbf); 0 = unshaped")
      ->capture_default_str();
  up->add_option(
        "--tcp-cc", spec->tcp_cc,
        "The TCP congestion control between the hosts (set on each host's route to the "
        "others): a name this kernel offers (net.ipv4.tcp_available_congestion_control), or "
        "'system' for this machine's default; cubic is Linux's default (docs/cluster.md)")
      ->capture_default_str();
  up->add_flag("--slurm", spec->slurm,
               "Also run a real Slurm on the hosts: munged and slurmctld in host 0, a slurmd in each "
               "host, one partition 'dls' over all (docs/slurm.md)");
  up->add_option("--slurm-cpus", spec->slurm_cpus,
                 "--slurm: CPUs of each Slurm node; 0 = this machine's cores")
      ->capture_default_str();
  up->add_option("--slurm-memory-mb", spec->slurm_memory_mb,
                 "--slurm: memory of each Slurm node in MiB; 0 = this machine's available memory / hosts")
      ->capture_default_str();
  up->callback([spec] { run_up(*spec); });
}

}  // namespace

void add_cluster_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "cluster",
      "An emulated multi-host cluster on this machine: network namespaces joined by "
      "shaped links (needs root; docs/cluster.md)");
  cmd->require_subcommand(1);
  auto name = std::make_shared<std::string>("dls");
  const std::string name_help = "The cluster's name (1 to 12 lower-case letters or digits)";

  add_up_command(*cmd, name_help);

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
      "exec", "Run a command on one host: in its network namespace, with its host name (and SLURM_CONF "
              "set when the cluster runs Slurm)");
  exec->add_option("--name", *name, name_help)->capture_default_str();
  exec->add_option("host", *host, "The host: its index (0 .. K-1), h<i>, name or address")
      ->required();
  exec->add_option("command", *command, "The command and its arguments (after --)")->required();
  exec->callback([name, host, command] { run_exec(*name, *host, *command); });

  auto mpi = std::make_shared<cluster::MpirunOptions>();
  auto mpi_extra = std::make_shared<std::string>();
  CLI::App* mpirun = cmd->add_subcommand(
      "mpirun", "Run a command under Open MPI's mpirun across the hosts: --workers-per-host ranks "
                "in each, mpirun in host 0, its TCP transports on the cluster's links");
  mpirun->add_option("--name", *name, name_help)->capture_default_str();
  mpirun->add_option("--workers-per-host", mpi->workers_per_host, "Ranks in each host")
      ->capture_default_str();
  mpirun->add_option("--mpirun-args", *mpi_extra, "More mpirun flags, e.g. '--bind-to none'");
  mpirun->add_option("command", mpi->command, "The program each rank runs (after --)")->required();
  mpirun->callback([name, mpi, mpi_extra] { run_mpirun(*name, *mpi, *mpi_extra); });

  CLI::App* agent = cmd->add_subcommand(
      "agent", "Open MPI's remote-shell agent for 'cluster mpirun' (like ssh): HOST WORDS... runs "
               "WORDS through the shell on HOST");
  agent->add_option("--name", *name, name_help)->capture_default_str();
  agent->prefix_command();
  agent->callback([name, agent] { run_agent(*name, agent->remaining()); });
}

}  // namespace dlscale::cli
