#pragma once
// A real Slurm on an emulated cluster (docs/slurm.md): `cluster up --slurm`
// runs Debian's munged and slurmctld in host 0 and one slurmd in each host,
// under the host's own name and address, configured without systemd or
// cgroups. Everything lives in the cluster's directory under
// /run/dlscale/clusters/NAME.slurm/; `cluster down` kills the daemons with
// the hosts' namespaces and removes it.
#include <string>
#include <utility>
#include <vector>

#include "cluster/cluster.h"

namespace dlscale::slurm {

/// The cluster's Slurm directory: slurm.conf, munge's key and socket, state,
/// spool and logs.
std::string slurm_dir(const std::string& cluster);
/// Its slurm.conf, which every Slurm command in the cluster reads (SLURM_CONF).
std::string slurm_conf_path(const std::string& cluster);

/// Throws dlscale::Error (one line; the CLI exits 2) naming the first of
/// munged, slurmctld, slurmd, sinfo, srun, sbatch that is not installed.
void check_slurm_installed();

/// The slurm.conf of `spec`, with its files under `dir`.
std::string slurm_conf(const cluster::ClusterSpec& spec, const std::string& dir);

/// Starts munged, slurmctld and every slurmd of a cluster whose hosts are
/// built, and waits until Slurm shows every node idle. Throws
/// dlscale::Error naming the daemon that failed to start with the last line
/// of its log, or the nodes that did not register within the timeout.
void start_slurm(const cluster::ClusterSpec& spec);

/// Removes the cluster's Slurm directory (before a start; `cluster down`
/// removes it with the cluster's other service directories).
void remove_slurm_files(const std::string& cluster);

/// "running", "stopped" (a daemon died) or "" when the cluster has no Slurm.
std::string slurm_state(const std::string& cluster);

/// What a process in the cluster needs to use its Slurm (SLURM_CONF); empty
/// when the cluster has no Slurm.
std::vector<std::pair<std::string, std::string>> slurm_client_env(const std::string& cluster);

}  // namespace dlscale::slurm
