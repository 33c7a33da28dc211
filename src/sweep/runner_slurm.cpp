// launcher slurm in a sweep: every repeat a batch job, up to max-jobs at
// once, followed through slurmctld's restarts (docs/cluster.md).
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "core/clock.h"
#include "core/error.h"
#include "core/files.h"
#include "core/job_env.h"
#include "sweep/sweep_run.h"

namespace dlscale::sweep::detail {
namespace {

constexpr double kCancelWaitS = 30;  // for cancelled jobs to leave Slurm's queue
constexpr double kControllerGraceS = 60;  // a slurmctld that stops answering mid-sweep (a restart)

}  // namespace

void Sweep::run_on_slurm(const PlannedRun& run) {
  const auto max_jobs = static_cast<std::size_t>(param_int(run.params, "max-jobs"));
  wait_for_jobs(max_jobs - 1);
  if (outcome_.interrupted || follow_earlier_job(run)) return;
  if (std::optional<ActiveRun> a = begin_run(run)) submit_repeat(std::move(*a));
}

void Sweep::submit_repeat(ActiveRun a) {
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

bool Sweep::follow_earlier_job(const PlannedRun& run) {
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

void Sweep::wait_for_jobs(std::size_t most) {
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

void Sweep::drain_jobs() { wait_for_jobs(0); }

bool Sweep::poll_jobs_through_outages() {
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

void Sweep::settle_jobs(const std::vector<slurm::JobState>& states) {
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

RepeatRecord Sweep::ended_job(const SlurmJob& job, const slurm::JobState& st) {
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

void Sweep::cancel_jobs() {
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

}  // namespace dlscale::sweep::detail
