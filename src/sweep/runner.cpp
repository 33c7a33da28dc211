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
#include "core/subprocess.h"

namespace dlscale::sweep {
namespace {


std::string format_duration(double s) {
  if (s < 0) return "?";
  const long long t = static_cast<long long>(s + 0.5);
  if (t >= 3600) return fmt::format("{}h{:02}m", t / 3600, (t % 3600) / 60);
  if (t >= 60) return fmt::format("{}m{:02}s", t / 60, t % 60);
  return fmt::format("{}s", t);
}

/// "resnet18 weak w2 b32 tree" and whatever else identifies the run.
std::string describe(const PlannedRun& run) {
  const Params& p = run.params;
  if (param_text(p, "kind") == "commbench") {
    return fmt::format("commbench w{} {}", param_text(p, "workers"), param_text(p, "op", "allreduce"));
  }
  std::string s = fmt::format("{} {} w{} b{}", param_text(p, "model", param_text(p, "kind")),
                              param_text(p, "scaling"), param_text(p, "workers"), param_text(p, "batch"));
  for (const char* name : {"strategy", "compress"}) {
    if (p.count(name)) s += " " + param_text(p, name);
  }
  for (const auto& [name, value] : p) {
    if (name[0] == '_' && !value.is_list()) s += " " + value.to_string();
  }
  return s;
}

/// The metric a completed run's progress line shows, with its unit and decimals.
struct Headline {
  const char* metric;
  const char* unit;
  int decimals;
};
Headline headline(const Params& p) {
  if (param_text(p, "kind") == "commbench") return {"busbw_gbps_peak", "GB/s peak busbw", 3};
  return {"samples_per_sec", "samples/s", 1};
}

/// The error line of a failed run: dlscale's own, or the log's last line.
std::string failure_detail(const std::string& log) {
  std::string last;
  std::string error_line;
  std::size_t start = 0;
  while (start < log.size()) {
    std::size_t end = log.find('\n', start);
    if (end == std::string::npos) end = log.size();
    std::string line = log.substr(start, end - start);
    start = end + 1;
    // Blank lines and rules ("-----" around mpirun's reports) say nothing.
    if (std::none_of(line.begin(), line.end(), [](unsigned char c) { return std::isalnum(c); })) continue;
    if (const std::size_t at = line.find("dlscale: error: "); at != std::string::npos) {
      error_line = line.substr(at + 16);
    }
    last = line;
  }
  std::string detail = error_line.empty() ? last : error_line;
  if (detail.size() > 300) detail = detail.substr(0, 300) + "...";
  return detail;
}

bool mentions_out_of_memory(const std::string& log) {
  std::string lower = log;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  return lower.find("out of memory") != std::string::npos;
}

bool process_alive(long long pid) { return pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM); }

/// Runs that ran out of memory, per (kind, model, workers, launcher): the
/// smallest per-worker batch that failed.
class OomRule {
 public:
  static std::string group(const Params& p) {
    return param_text(p, "kind") + "|" + param_text(p, "model") + "|" + param_text(p, "workers") + "|" +
           param_text(p, "launcher");
  }
  void record(const Params& p) {
    const long long b = param_int(p, "batch");
    auto [it, inserted] = smallest_.emplace(group(p), b);
    if (!inserted) it->second = std::min(it->second, b);
  }
  /// Why `p` is skipped, or "".
  std::string skip_reason(const Params& p) const {
    const auto it = smallest_.find(group(p));
    if (it == smallest_.end() || param_int(p, "batch") <= it->second) return "";
    return fmt::format("out of memory at batch {} for {} on {} worker(s); larger batches skipped", it->second,
                       param_text(p, "model", "this command"), param_text(p, "workers"));
  }

 private:
  std::map<std::string, long long> smallest_;
};

class Progress {
 public:
  Progress(const SweepRunOptions& o, int repeats_to_run) : o_(o), repeats_left_(repeats_to_run) {}

  void line(const std::string& text) {
    if (!o_.out) return;
    clear();
    *o_.out << text << "\n" << std::flush;
  }
  void live(const std::string& what, double run_elapsed) {
    if (!o_.out || !o_.live_progress) return;
    *o_.out << "\r\033[K" << what << " | " << format_duration(run_elapsed) << " | elapsed "
            << format_duration(now_seconds() - start_) << " | ETA " << eta(run_elapsed) << std::flush;
    shown_ = true;
  }
  void repeat_done(double wall_s) {
    done_s_ += wall_s;
    ++done_;
    --repeats_left_;
  }
  /// The average repeat so far times the repeats left, less the time the
  /// current one has already run.
  std::string eta(double current_elapsed) const {
    if (done_ == 0) return "?";
    return format_duration(std::max(0.0, done_s_ / done_ * std::max(repeats_left_, 0) - current_elapsed));
  }
  double elapsed() const { return now_seconds() - start_; }

 private:
  void clear() {
    if (shown_) *o_.out << "\r\033[K";
    shown_ = false;
  }
  const SweepRunOptions& o_;
  double start_ = now_seconds();
  double done_s_ = 0;
  int done_ = 0;
  int repeats_left_;
  bool shown_ = false;
};

std::string short_hash(const std::string& s) {
  return fmt::format("{:016x}", fnv1a(s.data(), s.size())).substr(0, 10);
}

}  // namespace

namespace {

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
    progress_ = std::make_unique<Progress>(o_, repeats_to_run_);
    progress_->line(fmt::format("sweep '{}': {} run(s) planned, {} to run, results in {}", o_.sweep_name,
                                plan_.size(), to_run, store_.path()));
    for (const PlannedRun& run : plan_) {
      if (o_.keep_going && !o_.keep_going()) {
        outcome_.interrupted = true;
        break;
      }
      run_one(run);
      if (outcome_.interrupted) break;
    }
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

  void run_one(const PlannedRun& run) {
    const std::string tag = fmt::format("[{}/{}] {}", run.index, plan_.size(), describe(run));
    if (run.skipped()) {
      ++outcome_.skipped;
      progress_->line(fmt::format("{}: skipped: {}", tag, run.skip_reason));
      return;
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
      return;
    }
    if (const std::string reason = oom_.skip_reason(run.params); !reason.empty()) {
      store_.finish_run(*claimed, kStatusSkipped, reason, start.started_at);
      ++outcome_.skipped;
      progress_->line(fmt::format("{}: skipped: {}", tag, reason));
      return;
    }
    ++outcome_.executed;
    run_repeats(run, *claimed, tag);
  }

  /// Runs the repeats until one fails; stores the run's outcome.
  void run_repeats(const PlannedRun& run, std::int64_t run_id, const std::string& tag) {
    const int repeats = static_cast<int>(param_int(run.params, "repeats"));
    std::string status = kStatusCompleted;
    std::string reason;
    std::vector<double> rates;
    nlohmann::json versions = o_.versions;
    for (int rep = 1; rep <= repeats && status == kStatusCompleted; ++rep) {
      const RepeatRecord rec = run_repeat(run, rep, fmt::format("{} repeat {}/{}", tag, rep, repeats));
      store_.add_repeat(run_id, rec);
      progress_->repeat_done(rec.wall_s);
      if (rec.status == kStatusCompleted) {
        rates.push_back(rec.metrics.at(headline(run.params).metric));
        add_program_versions(rec.record, versions);
      } else {
        status = rec.status;
        reason = fmt::format("repeat {}: {}", rep, rec.reason);
      }
    }
    store_.finish_run(run_id, status, reason, utc_timestamp(), versions);
    if (status == kStatusCompleted) {
      ++outcome_.completed;
      const Headline h = headline(run.params);
      progress_->line(fmt::format("{}: completed, {:.{}f} {} (median of {})", tag, median(rates), h.decimals,
                                  h.unit, rates.size()));
      return;
    }
    if (status == kStatusOom) oom_.record(run.params);
    if (status != kStatusInterrupted) ++outcome_.failed;
    progress_->line(fmt::format("{}: {}: {} (log: {})", tag, status, reason,
                                (dir_ / fmt::format("{:04}-{}-r*.log", run.index, short_hash(run.key))).string()));
  }

  /// One repeat as a child process, its log and record read back.
  RepeatRecord run_repeat(const PlannedRun& run, int rep, const std::string& what) {
    const std::string stem = fmt::format("{:04}-{}-r{}", run.index, short_hash(run.key), rep);
    RepeatRecord rec;
    rec.repeat = rep;
    rec.log_path = (dir_ / (stem + ".log")).string();
    const std::string record_path = (dir_ / (stem + ".json")).string();
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
      const bool is_oom = param_text(params, "kind") == "dlscale" && result.signal == 0
                              ? result.exit_code == kExitOutOfMemory
                              : mentions_out_of_memory(log);
      rec.status = is_oom ? kStatusOom : kStatusFailed;
      const std::string detail = failure_detail(log);
      rec.reason = result.describe(timeout) + (detail.empty() ? "" : ": " + detail);
    }
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
  std::unique_ptr<Progress> progress_;
  std::set<std::string> made_;  ///< clusters this sweep used, removed at its end
};

}  // namespace

SweepOutcome run_sweep(const std::vector<PlannedRun>& plan, ResultsStore& store, const SweepRunOptions& o) {
  return Sweep(plan, store, o).run();
}

}  // namespace dlscale::sweep
