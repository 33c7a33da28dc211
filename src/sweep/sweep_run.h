#pragma once
// One invocation of a sweep (sweep/runner.h's run_sweep), internal to the
// runner: sweep/runner.cpp runs on this machine, sweep/runner_slurm.cpp
// submits launcher slurm's repeats as batch jobs and follows them.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/subprocess.h"
#include "slurm/batch.h"
#include "sweep/runner.h"
#include "sweep/runner_parts.h"

namespace dlscale::sweep::detail {

/// A run being executed: its repeats so far.
struct ActiveRun {
  const PlannedRun* run = nullptr;
  std::int64_t id = 0;
  std::string tag;
  int repeats = 1;
  int done = 0;  ///< repeats finished
  std::string status = kStatusCompleted;
  std::string reason;
  std::vector<double> rates;
  nlohmann::json versions;
};

/// launcher slurm: one repeat of a run in flight as a batch job.
struct SlurmJob {
  ActiveRun active;
  std::string id;
  std::string started_at;
};

inline bool on_slurm(const PlannedRun& run) { return param_text(run.params, "launcher") == "slurm"; }

/// One invocation of a sweep: what it decided so far, where its output goes.
class Sweep {
 public:
  Sweep(const std::vector<PlannedRun>& plan, ResultsStore& store, const SweepRunOptions& o)
      : plan_(plan), store_(store), o_(o), dir_(std::filesystem::path(o.output_dir) / o.sweep_name) {}
  SweepOutcome run();
 private:
  /// What the store already holds decides what runs; earlier out-of-memory
  /// failures of this sweep count for the DLBS rule. Returns the runs to run.
  int read_store();
  bool needs_run(const std::optional<RunRecord>& stored_run, std::string* why_not) const;
  /// "[3/8] lenet weak w2 b32 ...": how progress lines name the run.
  std::string tag_of(const PlannedRun& run) const;
  /// The run `id` of the store, about to execute its repeats.
  ActiveRun active_run(const PlannedRun& run, std::int64_t id) const;
  /// Claims the run unless it is skipped or done; nullopt when it does not run.
  std::optional<ActiveRun> begin_run(const PlannedRun& run);
  /// Runs the repeats one after another until one fails.
  void run_one(const PlannedRun& run);
  /// --interleave: where the group of runs that starts at plan_[first] ends
  /// (consecutive local runs on the same cluster, or on none).
  std::size_t group_end(std::size_t first) const;
  /// --interleave: the runs of plan_[first, last) in rounds, repeat k of
  /// each before repeat k + 1 of any; a run that fails leaves the rounds.
  void run_interleaved(std::size_t first, std::size_t last);
  /// Stores one finished repeat; returns whether the run goes on to the next.
  bool record_repeat(ActiveRun& a, const RepeatRecord& rec);
  /// Stores the run's outcome.
  void end_run(const ActiveRun& a);
  std::string stem(const PlannedRun& run, int rep) const;
  /// One repeat as a child process, its log and record read back.
  RepeatRecord run_repeat(const PlannedRun& run, int rep, const std::string& what);
  /// The repeat's status and reason, and its metrics when it completed.
  void judge(const Params& params, const SubprocessResult& result, double timeout, const std::string& log,
             RepeatRecord& rec);

  // --- launcher slurm: every repeat a batch job, up to max-jobs at once --- (sweep/runner_slurm.cpp)
  void run_on_slurm(const PlannedRun& run);
  /// Submits the run's next repeat; a job Slurm refuses fails the run.
  void submit_repeat(ActiveRun a);
  /// A run an earlier, killed sweep left as a job Slurm still knows: follow
  /// it instead of submitting it again. Returns whether it did.
  bool follow_earlier_job(const PlannedRun& run);
  /// Polls the jobs until at most `most` are in flight (or the sweep is interrupted).
  void wait_for_jobs(std::size_t most);
  void drain_jobs();
  /// Polls the jobs, riding out a slurmctld that stops answering for up to
  /// kControllerGraceS (a restart); longer, the sweep stops (exit 5) with
  /// its jobs in flight, which a later invocation follows. Returns false
  /// when slurmctld could not be reached this time.
  bool poll_jobs_through_outages();
  /// Stores every job Slurm has ended (`states`: each job's, in order) and
  /// submits the next repeat of its run.
  void settle_jobs(const std::vector<slurm::JobState>& states);
  /// The repeat a job that Slurm ended ran: its log, its record, and Slurm's
  /// verdict where the program could not give one.
  RepeatRecord ended_job(const SlurmJob& job, const slurm::JobState& st);
  /// Ctrl-C or SIGTERM: every job in flight is cancelled and its run stored as interrupted.
  void cancel_jobs();
  /// The clusters this sweep brought up go when it ends.
  void remove_clusters();

  const std::vector<PlannedRun>& plan_;
  ResultsStore& store_;
  const SweepRunOptions& o_;
  const std::filesystem::path dir_;
  SweepOutcome outcome_;
  OomRule oom_;
  int repeats_to_run_ = 0;
  int slurm_runs_to_run_ = 0;
  double unreachable_since_ = -1;  ///< when slurmctld stopped answering the polls; -1: it answers
  std::unique_ptr<Progress> progress_;
  std::set<std::string> made_;  ///< clusters this sweep used, removed at its end
  std::vector<SlurmJob> jobs_;   ///< launcher slurm: the jobs in flight
};

}  // namespace dlscale::sweep::detail
