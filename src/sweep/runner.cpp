#include "sweep/runner.h"

#include <signal.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>

#include "cluster/cluster.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/files.h"
#include "core/hash.h"
#include "core/stats.h"
#include "core/job_env.h"
#include "core/subprocess.h"
#include "slurm/batch.h"
#include "sweep/runner_parts.h"

namespace dlscale::sweep {
namespace {

using namespace detail;  // NOLINT: the runner's own parts

/// launcher: cluster — brings the run's emulated cluster up (a no-op when it
/// is); throws dlscale::Error (the run fails) when it cannot.
void bring_up_cluster(const Params& p, std::set<std::string>& made, Progress& progress) {
  cluster::ClusterSpec spec;
  spec.name = param_text(p, "cluster");
  spec.hosts = static_cast<int>(param_int(p, "hosts"));
  spec.link_mbit = param_or(p, "link-mbit", Value(0)).number();
  const cluster::UpOutcome outcome = cluster::cluster_up(spec);
  // Also a cluster a killed sweep left up: the sweep's clusters (named after
  // their topology) are removed when it ends.
  made.insert(spec.name);
  if (outcome == cluster::UpOutcome::kCreated) {
    progress.line(fmt::format("cluster '{}' is up: {}", spec.name, cluster::describe(spec)));
  }
}

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

constexpr double kCancelWaitS = 30;  // for cancelled jobs to leave Slurm's queue
constexpr double kControllerGraceS = 60;  // a slurmctld that stops answering mid-sweep (a restart)

bool on_slurm(const PlannedRun& run) { return param_text(run.params, "launcher") == "slurm"; }

/// One invocation of a sweep: what it decided so far, where its output goes.
class Sweep {
 public:
  Sweep(const std::vector<PlannedRun>& plan, ResultsStore& store, const SweepRunOptions& o)
      : plan_(plan), store_(store), o_(o), dir_(std::filesystem::path(o.output_dir) / o.sweep_name) {}

  SweepOutcome run() {
    outcome_.planned = static_cast<int>(plan_.size());
    check_sweep_name(o_.sweep_name);
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    DLSCALE_CHECK(!ec, "cannot create the run output directory '{}': {}", dir_.string(), ec.message());
    const int to_run = read_store();
    // A resume while slurmctld is down must neither fail nor resubmit the
    // runs whose jobs are in flight: stop before anything is changed.
    if (slurm_runs_to_run_ > 0) slurm::check_controller();
    progress_ = std::make_unique<Progress>(o_, repeats_to_run_);
    progress_->line(fmt::format("sweep '{}': {} run(s) planned, {} to run, results in {}", o_.sweep_name,
                                plan_.size(), to_run, store_.path()));
    for (const PlannedRun& run : plan_) {
      if (o_.keep_going && !o_.keep_going()) {
        outcome_.interrupted = true;
        break;
      }
      if (on_slurm(run)) {
        run_on_slurm(run);
      } else {
        drain_jobs();  // a local run does not compete with the sweep's jobs
        if (!outcome_.interrupted) run_one(run);
      }
      if (outcome_.interrupted) break;
    }
    drain_jobs();
    if (outcome_.interrupted) cancel_jobs();
    remove_clusters();
    progress_->line(fmt::format(
        "sweep '{}': {} completed, {} failed, {} skipped, {} already done of {} planned, in {}{}", o_.sweep_name,
        outcome_.completed, outcome_.failed, outcome_.skipped, outcome_.already_done, outcome_.planned,
        format_duration(progress_->elapsed()), outcome_.interrupted ? " (interrupted)" : ""));
    return outcome_;
  }

 private:
  /// What the store already holds decides what runs; earlier out-of-memory
  /// failures of this sweep count for the DLBS rule. Returns the runs to run.
  int read_store() {
    std::map<std::string, RunRecord> stored;
    for (RunRecord& r : store_.runs(o_.sweep_name, false)) {
      if (r.status == kStatusOom) oom_.record(r.params);
      stored.emplace(r.key, std::move(r));
    }
    int to_run = 0;
    for (const PlannedRun& run : plan_) {
      std::string unused;
      const auto it = stored.find(run.key);
      if (!run.skipped() && needs_run(it == stored.end() ? std::nullopt : std::optional<RunRecord>(it->second),
                                      &unused)) {
        repeats_to_run_ += static_cast<int>(param_int(run.params, "repeats"));
        ++to_run;
        if (on_slurm(run)) ++slurm_runs_to_run_;
      }
    }
    return to_run;
  }

  bool needs_run(const std::optional<RunRecord>& stored_run, std::string* why_not) const {
    if (!stored_run || o_.rerun == Rerun::kAll) return true;
    const RunRecord& r = *stored_run;
    if (r.status == kStatusRunning && r.pid != o_.pid && r.host == o_.host && process_alive(r.pid)) {
      *why_not = fmt::format("running in another sweep (pid {})", r.pid);
      return false;
    }
    if (r.status == kStatusRunning || r.status == kStatusInterrupted) return true;
    if (r.status != kStatusCompleted && o_.rerun == Rerun::kFailed) return true;
    *why_not = fmt::format("already {} in {}", r.status, store_.path());
    return false;
  }

  /// "[3/8] lenet weak w2 b32 ...": how progress lines name the run.
  std::string tag_of(const PlannedRun& run) const {
    return fmt::format("[{}/{}] {}", run.index, plan_.size(), describe(run));
  }

  /// The run `id` of the store, about to execute its repeats.
  ActiveRun active_run(const PlannedRun& run, std::int64_t id) const {
    ActiveRun a;
    a.run = &run;
    a.id = id;
    a.tag = tag_of(run);
    a.repeats = static_cast<int>(param_int(run.params, "repeats"));
    a.versions = o_.versions;
    return a;
  }

  /// Claims the run unless it is skipped or done; nullopt when it does not run.
  std::optional<ActiveRun> begin_run(const PlannedRun& run) {
    const std::string tag = tag_of(run);
    if (run.skipped()) {
      ++outcome_.skipped;
      progress_->line(fmt::format("{}: skipped: {}", tag, run.skip_reason));
      return std::nullopt;
    }
    // Checked against the store as it is now, in the transaction that starts
    // the run: another sweep of the same file may have run it meanwhile.
    std::string why_not;
    const RunStart start{o_.sweep_name, run.params, utc_timestamp(), o_.host, o_.pid, o_.versions};
    const std::optional<std::int64_t> claimed =
        store_.claim_run(start, [&](const std::optional<RunRecord>& r) { return needs_run(r, &why_not); });
    if (!claimed) {
      ++outcome_.already_done;
      progress_->line(fmt::format("{}: {}", tag, why_not));
      return std::nullopt;
    }
    if (const std::string reason = oom_.skip_reason(run.params); !reason.empty()) {
      store_.finish_run(*claimed, kStatusSkipped, reason, start.started_at);
      ++outcome_.skipped;
      progress_->line(fmt::format("{}: skipped: {}", tag, reason));
      return std::nullopt;
    }
    ++outcome_.executed;
    return active_run(run, *claimed);
  }

  /// Runs the repeats one after another until one fails.
  void run_one(const PlannedRun& run) {
    std::optional<ActiveRun> a = begin_run(run);
    if (!a) return;
    while (true) {
      const int rep = a->done + 1;
      if (!record_repeat(*a, run_repeat(run, rep, fmt::format("{} repeat {}/{}", a->tag, rep, a->repeats)))) break;
    }
    end_run(*a);
  }

  /// Stores one finished repeat; returns whether the run goes on to the next.
  bool record_repeat(ActiveRun& a, const RepeatRecord& rec) {
    store_.add_repeat(a.id, rec);
    progress_->repeat_done(rec.wall_s);
    ++a.done;
    if (rec.status == kStatusCompleted) {
      a.rates.push_back(rec.metrics.at(headline(a.run->params).metric));
      add_program_versions(rec.record, a.versions);
    } else {
      a.status = rec.status;
      a.reason = fmt::format("repeat {}: {}", rec.repeat, rec.reason);
    }
    return a.status == kStatusCompleted && a.done < a.repeats;
  }

  /// Stores the run's outcome.
  void end_run(const ActiveRun& a) {
    const PlannedRun& run = *a.run;
    store_.finish_run(a.id, a.status, a.reason, utc_timestamp(), a.versions);
    if (a.status == kStatusCompleted) {
      ++outcome_.completed;
      const Headline h = headline(run.params);
      progress_->line(fmt::format("{}: completed, {:.{}f} {} (median of {})", a.tag, median(a.rates), h.decimals,
                                  h.unit, a.rates.size()));
      return;
    }
    if (a.status == kStatusOom) oom_.record(run.params);
    if (a.status != kStatusInterrupted) ++outcome_.failed;
    progress_->line(fmt::format("{}: {}: {} (log: {})", a.tag, a.status, a.reason,
                                (dir_ / fmt::format("{:04}-{}-r*.log", run.index, short_hash(run.key))).string()));
  }

  std::string stem(const PlannedRun& run, int rep) const {
    return fmt::format("{:04}-{}-r{}", run.index, short_hash(run.key), rep);
  }

  /// One repeat as a child process, its log and record read back.
  RepeatRecord run_repeat(const PlannedRun& run, int rep, const std::string& what) {
    RepeatRecord rec;
    rec.repeat = rep;
    rec.log_path = (dir_ / (stem(run, rep) + ".log")).string();
    const std::string record_path = (dir_ / (stem(run, rep) + ".json")).string();
    std::error_code ec;
    std::filesystem::remove(record_path, ec);
    rec.started_at = utc_timestamp();
    if (!o_.live_progress) progress_->line(what + " ...");
    const double timeout = param_or(run.params, "timeout", Value(600)).number();
    SubprocessResult result;
    try {
      if (param_text(run.params, "launcher") == "cluster") bring_up_cluster(run.params, made_, *progress_);
      SubprocessOptions so;
      so.argv = build_command(repeat_params(run.params, rep), o_.dlscale_binary, record_path);
      so.log_path = rec.log_path;
      so.timeout_s = timeout;
      const double t0 = now_seconds();
      so.on_tick = [&] {
        progress_->live(what, now_seconds() - t0);
        return !o_.keep_going || o_.keep_going();
      };
      result = run_subprocess(so);
    } catch (const Error& e) {
      result.exec_failed = true;
      write_file_atomic(rec.log_path, std::string("dlscale: error: ") + e.what() + "\n");
    }
    rec.ended_at = utc_timestamp();
    rec.wall_s = result.wall_s;
    const std::string log = std::filesystem::exists(rec.log_path) ? read_file(rec.log_path) : "";
    if (std::filesystem::exists(record_path)) rec.record = read_file(record_path);
    judge(run.params, result, timeout, log, rec);
    return rec;
  }

  /// The repeat's status and reason, and its metrics when it completed.
  void judge(const Params& params, const SubprocessResult& result, double timeout, const std::string& log,
             RepeatRecord& rec) {
    if (result.ok()) {
      try {
        rec.metrics = extract_metrics(params, rec.record, log);
        rec.status = kStatusCompleted;
      } catch (const Error& e) {
        rec.status = kStatusFailed;
        rec.reason = e.what();
      }
    } else if (result.interrupted) {
      rec.status = kStatusInterrupted;
      rec.reason = "interrupted by the user";
      outcome_.interrupted = true;
    } else if (result.timed_out) {
      rec.status = kStatusTimeout;
      rec.reason = result.describe(timeout);
    } else {
      rec.status = ran_out_of_memory(params, result.exit_code, result.signal, log) ? kStatusOom : kStatusFailed;
      const std::string detail = failure_detail(log);
      rec.reason = result.describe(timeout) + (detail.empty() ? "" : ": " + detail);
    }
  }

  // --- launcher slurm: every repeat a batch job, up to max-jobs at once ---

  void run_on_slurm(const PlannedRun& run) {
    const auto max_jobs = static_cast<std::size_t>(param_int(run.params, "max-jobs"));
    wait_for_jobs(max_jobs - 1);
    if (outcome_.interrupted || follow_earlier_job(run)) return;
    if (std::optional<ActiveRun> a = begin_run(run)) submit_repeat(std::move(*a));
  }

  /// Submits the run's next repeat; a job Slurm refuses fails the run.
  void submit_repeat(ActiveRun a) {
    const PlannedRun& run = *a.run;
    const int rep = a.done + 1;
    // Absolute: the job may start in another directory (or on another node
    // of a shared file system).
    const std::string base = std::filesystem::absolute(dir_ / stem(run, rep)).string();
    std::error_code ec;
    std::filesystem::remove(base + ".json", ec);
    std::filesystem::remove(base + ".log", ec);
    SlurmJob job;
    job.started_at = utc_timestamp();
    try {
      const std::vector<std::string> argv = build_command(repeat_params(run.params, rep), o_.dlscale_binary,
                                                          base + ".json");
      slurm::write_batch_script(base + ".sbatch", argv,
                                fmt::format("dlscale sweep '{}', {} repeat {}", o_.sweep_name, a.tag, rep));
      slurm::BatchJob b;
      b.name = fmt::format("dls-{}-{}", o_.sweep_name.substr(0, 40), run.index);
      b.script_path = base + ".sbatch";
      b.log_path = base + ".log";
      b.nodes = static_cast<int>(param_or(run.params, "hosts", Value(0)).number());
      b.tasks_per_node = static_cast<int>(param_or(run.params, "workers-per-host", Value(0)).number());
      b.tasks = static_cast<int>(param_int(run.params, "workers"));
      b.time_limit_s = param_or(run.params, "timeout", Value(600)).number();
      b.env = {{kEnvJobSecret, random_job_secret()}};  // every job its own
      job.id = slurm::submit_job(b);
    } catch (const PeerFailure&) {
      throw;  // slurmctld unreachable: the run is not the cause; a resume submits it
    } catch (const Error& e) {
      RepeatRecord rec;
      rec.repeat = rep;
      rec.status = kStatusFailed;
      rec.reason = e.what();
      rec.started_at = rec.ended_at = job.started_at;
      rec.log_path = base + ".log";
      write_file_atomic(rec.log_path, std::string("dlscale: error: ") + e.what() + "\n");
      record_repeat(a, rec);  // a failed repeat ends its run
      end_run(a);
      return;
    }
    store_.set_slurm_job(a.id, job.id);
    progress_->line(fmt::format("{} repeat {}/{}: submitted as Slurm job {}", a.tag, rep, a.repeats, job.id));
    job.active = std::move(a);
    jobs_.push_back(std::move(job));
  }

  /// A run an earlier, killed sweep left as a job Slurm still knows: follow
  /// it instead of submitting it again. Returns whether it did.
  bool follow_earlier_job(const PlannedRun& run) {
    const std::optional<RunRecord> r = store_.find_run(o_.sweep_name, run.key);
    if (!r || r->status != kStatusRunning || r->slurm_job.empty() || o_.rerun == Rerun::kAll) return false;
    if (r->pid != o_.pid && r->host == o_.host && process_alive(r->pid)) return false;  // its sweep follows it
    const slurm::JobState st = slurm::query_job(r->slurm_job);
    if (!st.known) return false;
    store_.take_over_run(r->id, o_.host, o_.pid);
    SlurmJob job;
    job.id = r->slurm_job;
    job.started_at = r->started_at;
    job.active = active_run(run, r->id);
    ActiveRun& a = job.active;
    for (const RunRecord& stored : store_.runs(o_.sweep_name)) {
      if (stored.id != r->id) continue;
      for (const RepeatRecord& done : stored.repeats) {
        ++a.done;
        const auto metric = done.metrics.find(headline(run.params).metric);
        if (done.status == kStatusCompleted && metric != done.metrics.end()) a.rates.push_back(metric->second);
      }
    }
    ++outcome_.executed;
    progress_->line(fmt::format("{} repeat {}/{}: following Slurm job {} ({}), submitted by an earlier sweep",
                                a.tag, a.done + 1, a.repeats, job.id, st.state));
    jobs_.push_back(std::move(job));
    return true;
  }

  /// Polls the jobs until at most `most` are in flight (or the sweep is interrupted).
  void wait_for_jobs(std::size_t most) {
    while (jobs_.size() > most) {
      if (poll_jobs_through_outages() && jobs_.size() <= most) return;
      for (int tick = 0; tick < 10; ++tick) {
        if (o_.keep_going && !o_.keep_going()) {
          outcome_.interrupted = true;
          return;
        }
        progress_->live(fmt::format("{} Slurm job(s) in flight", jobs_.size()), 0);
        ::usleep(100000);
      }
    }
  }
  void drain_jobs() { wait_for_jobs(0); }

  /// Polls the jobs, riding out a slurmctld that stops answering for up to
  /// kControllerGraceS (a restart); longer, the sweep stops (exit 5) with
  /// its jobs in flight, which a later invocation follows. Returns false
  /// when slurmctld could not be reached this time.
  bool poll_jobs_through_outages() {
    std::vector<slurm::JobState> states;
    try {
      // Every state first: a slurmctld out of reach throws before anything changed.
      for (const SlurmJob& job : jobs_) states.push_back(slurm::query_job(job.id));
      unreachable_since_ = -1;
    } catch (const PeerFailure&) {
      if (unreachable_since_ < 0) unreachable_since_ = now_seconds();
      const double down = now_seconds() - unreachable_since_;
      if (down > kControllerGraceS) throw;
      progress_->live(fmt::format("slurmctld has not answered for {:.0f} s; retrying for up to {:g} s", down,
                                  kControllerGraceS), 0);
      return false;
    }
    settle_jobs(states);
    return true;
  }

  /// Stores every job Slurm has ended (`states`: each job's, in order) and
  /// submits the next repeat of its run.
  void settle_jobs(const std::vector<slurm::JobState>& states) {
    std::vector<SlurmJob> still;
    std::vector<SlurmJob> ended;
    for (std::size_t i = 0; i < jobs_.size(); ++i) {
      SlurmJob& job = jobs_[i];
      const slurm::JobState& st = states[i];
      if (st.active()) {
        still.push_back(std::move(job));
        continue;
      }
      RepeatRecord rec = ended_job(job, st);
      if (record_repeat(job.active, rec)) {
        ended.push_back(std::move(job));
      } else {
        end_run(job.active);
      }
    }
    jobs_ = std::move(still);
    for (SlurmJob& job : ended) submit_repeat(std::move(job.active));
  }

  /// The repeat a job that Slurm ended ran: its log, its record, and Slurm's
  /// verdict where the program could not give one.
  RepeatRecord ended_job(const SlurmJob& job, const slurm::JobState& st) {
    const PlannedRun& run = *job.active.run;
    RepeatRecord rec;
    rec.repeat = job.active.done + 1;
    const std::string base = (dir_ / stem(run, rec.repeat)).string();
    rec.log_path = base + ".log";
    rec.started_at = job.started_at;
    rec.ended_at = utc_timestamp();
    rec.wall_s = st.run_time_s;
    std::error_code ec;
    const std::string log = std::filesystem::exists(rec.log_path, ec) ? read_file(rec.log_path) : "";
    if (std::filesystem::exists(base + ".json", ec)) rec.record = read_file(base + ".json");
    const std::string detail = failure_detail(log);
    const std::string slurm_says = st.known ? fmt::format("Slurm job {} ended {}", job.id, st.state)
                                            : fmt::format("Slurm job {} is unknown to scontrol and sacct", job.id);
    if (st.state == "COMPLETED" || (!st.known && !rec.record.empty())) {
      SubprocessResult ok;
      judge(run.params, ok, 0, log, rec);
      return rec;
    }
    const bool oom = st.state == "OUT_OF_MEMORY" ||
                     (st.state == "FAILED" ? ran_out_of_memory(run.params, st.exit_code, st.signal, log)
                                           : mentions_out_of_memory(log));
    rec.status = st.state == "TIMEOUT" ? kStatusTimeout : oom ? kStatusOom : kStatusFailed;
    rec.reason = slurm_says;
    if (st.state == "FAILED") rec.reason += st.signal ? fmt::format(" (signal {})", st.signal)
                                                      : fmt::format(" (exit code {})", st.exit_code);
    if (st.known && st.reason != "None" && !st.reason.empty()) rec.reason += fmt::format(", reason {}", st.reason);
    if (!detail.empty()) rec.reason += ": " + detail;
    return rec;
  }

  /// Ctrl-C or SIGTERM: every job in flight is cancelled and its run stored as interrupted.
  void cancel_jobs() {
    for (SlurmJob& job : jobs_) {
      slurm::cancel_job(job.id);
      RepeatRecord rec;
      rec.repeat = job.active.done + 1;
      rec.status = kStatusInterrupted;
      rec.reason = fmt::format("interrupted by the user; Slurm job {} cancelled", job.id);
      rec.started_at = job.started_at;
      rec.ended_at = utc_timestamp();
      rec.log_path = (dir_ / (stem(*job.active.run, rec.repeat) + ".log")).string();
      record_repeat(job.active, rec);
      end_run(job.active);
    }
    // Nothing of the sweep stays in Slurm's queue: wait while Slurm stops
    // what ran (its KillWait), but not for ever.
    const double deadline = now_seconds() + kCancelWaitS;
    try {
      while (!jobs_.empty() && now_seconds() < deadline) {
        jobs_.erase(std::remove_if(jobs_.begin(), jobs_.end(),
                                   [](const SlurmJob& j) { return !slurm::query_job(j.id).active(); }),
                    jobs_.end());
        if (!jobs_.empty()) ::usleep(200000);
      }
      for (const SlurmJob& job : jobs_) {
        progress_->line(fmt::format("sweep '{}': Slurm job {} was cancelled but is still {} after {:g} s",
                                    o_.sweep_name, job.id, slurm::query_job(job.id).state, kCancelWaitS));
      }
    } catch (const PeerFailure& e) {
      progress_->line(fmt::format("sweep '{}': {} job(s) cancelled, but {}", o_.sweep_name, jobs_.size(), e.what()));
    }
    jobs_.clear();
  }

  /// The clusters this sweep brought up go when it ends.
  void remove_clusters() {
    for (const std::string& name : made_) {
      try {
        cluster::cluster_down(name);
        progress_->line(fmt::format("sweep '{}': removed cluster '{}'", o_.sweep_name, name));
      } catch (const Error& e) {
        progress_->line(
            fmt::format("sweep '{}': could not remove cluster '{}': {}", o_.sweep_name, name, e.what()));
      }
    }
  }

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

}  // namespace

SweepOutcome run_sweep(const std::vector<PlannedRun>& plan, ResultsStore& store, const SweepRunOptions& o) {
  return Sweep(plan, store, o).run();
}

}  // namespace dlscale::sweep
