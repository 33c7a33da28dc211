#pragma once
// Slurm batch jobs from dlscale's side (docs/slurm.md): a job's script,
// `sbatch` to submit it, `scontrol show job` (or `sacct` once Slurm has
// forgotten it) to follow it, `scancel` to stop it. Works against any Slurm
// whose commands are on PATH: the emulated cluster's (run inside one of its
// hosts, SLURM_CONF set) or a real one (run on a login node).
#include <string>
#include <utility>
#include <vector>

namespace dlscale::slurm {

/// What `sbatch` is asked for.
struct BatchJob {
  std::string name;         ///< --job-name
  std::string script_path;  ///< the script written by write_batch_script
  std::string log_path;     ///< --output: the job's stdout and stderr
  int nodes = 0;            ///< --nodes; 0 = Slurm chooses
  int tasks_per_node = 0;   ///< --ntasks-per-node; 0 = not given
  int tasks = 1;            ///< --ntasks
  double time_limit_s = 0;  ///< --time, rounded up to whole minutes; 0 = the partition's
  std::vector<std::string> extra;  ///< more sbatch flags
  /// Set in sbatch's environment (which its job inherits: --export=ALL).
  std::vector<std::pair<std::string, std::string>> env;
};

/// Writes a /bin/sh script that runs `argv` (each word quoted for the shell)
/// with exec, and makes it executable. Throws dlscale::Error naming the file.
void write_batch_script(const std::string& path, const std::vector<std::string>& argv,
                        const std::string& comment);

/// The sbatch command line for `job`.
std::vector<std::string> sbatch_command(const BatchJob& job);

/// Submits the job; returns its ID. Throws dlscale::Error with sbatch's own
/// message when Slurm refuses it, dlscale::PeerFailure when slurmctld cannot
/// be reached.
std::string submit_job(const BatchJob& job);

/// What Slurm says of a job.
struct JobState {
  bool known = false;        ///< Slurm still knows the job (or its accounting does)
  std::string state;         ///< PENDING, RUNNING, COMPLETING, COMPLETED, FAILED, TIMEOUT, CANCELLED, NODE_FAIL, OUT_OF_MEMORY, ...
  std::string reason;        ///< Slurm's Reason (None when none)
  int exit_code = 0;         ///< of the batch script
  int signal = 0;            ///< that ended it, or 0
  double run_time_s = 0;     ///< RunTime
  /// Queued or running: not ended yet.
  bool active() const;
};

/// `scontrol show job -o ID` parsed; Slurm's key=value line.
JobState parse_scontrol_job(const std::string& line);
/// "1-02:03:04", "02:03:04", "03:04" as seconds; 0 when malformed.
double parse_slurm_duration(const std::string& text);

/// Asks scontrol, then sacct. `known` is false when neither knows the job;
/// throws dlscale::PeerFailure when slurmctld cannot be reached, or when a
/// signal ended scontrol or sacct before it answered. Like every Slurm
/// command here, they run in their own process group, out of reach of a
/// Ctrl-C meant for the sweep.
JobState query_job(const std::string& id);

/// Whether a Slurm command's output says slurmctld could not be reached.
bool says_controller_unreachable(const std::string& output);
/// Throws dlscale::PeerFailure (exit 5): "cannot reach slurmctld (COMMAND:
/// its last line); ..." saying that nothing was changed.
[[noreturn]] void throw_controller_unreachable(const std::string& command, const std::string& output);
/// `scontrol ping`: throws as above unless slurmctld answers. Does nothing
/// where scontrol is missing (sbatch's own check names the package).
void check_controller();

/// scancel; returns whether Slurm accepted it (false when the job is gone).
bool cancel_job(const std::string& id);

}  // namespace dlscale::slurm
