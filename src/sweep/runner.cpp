#include "sweep/runner.h"


#include <algorithm>
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
#include "core/subprocess.h"
#include "slurm/batch.h"
#include "sweep/runner_parts.h"
#include "sweep/sweep_run.h"

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
  spec.rack_hosts = static_cast<int>(param_or(p, "rack-hosts", Value(0)).number());
  spec.uplink_mbit = param_or(p, "uplink-mbit", Value(0)).number();
  spec.tcp_cc = param_or(p, "tcp-cc", Value(std::string(cluster::kDefaultTcpCc))).string();
  const cluster::UpResult up = cluster::cluster_up(spec);
  // Also a cluster a killed sweep left up: the sweep's clusters (named after
  // their topology) are removed when it ends.
  made.insert(spec.name);
  if (up.outcome == cluster::UpOutcome::kCreated) {
    progress.line(fmt::format("cluster '{}' is up: {}", spec.name, cluster::describe(up.spec)));
  }
}

}  // namespace

namespace detail {

SweepOutcome Sweep::run() {
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
  for (std::size_t i = 0; i < plan_.size();) {
    const PlannedRun& run = plan_[i];
    if (o_.keep_going && !o_.keep_going()) {
      outcome_.interrupted = true;
      break;
    }
    std::size_t next = i + 1;
    if (on_slurm(run)) {
      run_on_slurm(run);
    } else {
      drain_jobs();  // a local run does not compete with the sweep's jobs
      if (o_.interleave) next = group_end(i);
      if (!outcome_.interrupted) {
        if (o_.interleave) {
          run_interleaved(i, next);
        } else {
          run_one(run);
        }
      }
    }
    if (outcome_.interrupted) break;
    i = next;
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

int Sweep::read_store() {
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

bool Sweep::needs_run(const std::optional<RunRecord>& stored_run, std::string* why_not) const {
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

std::string Sweep::tag_of(const PlannedRun& run) const {
  return fmt::format("[{}/{}] {}", run.index, plan_.size(), describe(run));
}

ActiveRun Sweep::active_run(const PlannedRun& run, std::int64_t id) const {
  ActiveRun a;
  a.run = &run;
  a.id = id;
  a.tag = tag_of(run);
  a.repeats = static_cast<int>(param_int(run.params, "repeats"));
  a.versions = o_.versions;
  return a;
}

std::optional<ActiveRun> Sweep::begin_run(const PlannedRun& run) {
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

void Sweep::run_one(const PlannedRun& run) {
  std::optional<ActiveRun> a = begin_run(run);
  if (!a) return;
  while (true) {
    const int rep = a->done + 1;
    if (!record_repeat(*a, run_repeat(run, rep, fmt::format("{} repeat {}/{}", a->tag, rep, a->repeats)))) break;
  }
  end_run(*a);
}

std::size_t Sweep::group_end(std::size_t first) const {
  const std::string cluster = param_text(plan_[first].params, "cluster");
  std::size_t last = first + 1;
  while (last < plan_.size() && !on_slurm(plan_[last]) &&
         param_text(plan_[last].params, "cluster") == cluster) {
    ++last;
  }
  return last;
}

void Sweep::run_interleaved(std::size_t first, std::size_t last) {
  std::vector<std::optional<ActiveRun>> going(last - first);
  bool any = true;
  for (int rep = 1; any && !outcome_.interrupted; ++rep) {
    any = false;
    for (std::size_t i = first; i < last && !outcome_.interrupted; ++i) {
      if (o_.keep_going && !o_.keep_going()) {
        outcome_.interrupted = true;
        break;
      }
      std::optional<ActiveRun>& a = going[i - first];
      // Claimed at its first repeat: the out-of-memory rule sees the runs
      // before it in the group fail in round 1.
      if (rep == 1) a = begin_run(plan_[i]);
      if (!a) continue;
      const std::string what = fmt::format("{} repeat {}/{}", a->tag, rep, a->repeats);
      if (record_repeat(*a, run_repeat(plan_[i], rep, what))) {
        any = true;
      } else {
        end_run(*a);
        a.reset();
      }
    }
  }
  // Interrupted between repeats: the runs still claimed are stored as such
  // (a later sweep runs them again).
  for (std::optional<ActiveRun>& a : going) {
    if (!a) continue;
    a->status = kStatusInterrupted;
    a->reason = fmt::format("interrupted by the user after {} of {} repeats", a->done, a->repeats);
    end_run(*a);
  }
}

bool Sweep::record_repeat(ActiveRun& a, const RepeatRecord& rec) {
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

void Sweep::end_run(const ActiveRun& a) {
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

std::string Sweep::stem(const PlannedRun& run, int rep) const {
  return fmt::format("{:04}-{}-r{}", run.index, short_hash(run.key), rep);
}

RepeatRecord Sweep::run_repeat(const PlannedRun& run, int rep, const std::string& what) {
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

void Sweep::judge(const Params& params, const SubprocessResult& result, double timeout, const std::string& log,
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

void Sweep::remove_clusters() {
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

}  // namespace detail

SweepOutcome run_sweep(const std::vector<PlannedRun>& plan, ResultsStore& store, const SweepRunOptions& o) {
  return Sweep(plan, store, o).run();
}

}  // namespace dlscale::sweep
