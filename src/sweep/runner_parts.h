#pragma once
// The sweep runner's parts that do not depend on how a run is launched:
// how a run is named and judged, the out-of-memory rule and the progress
// lines (runner.cpp uses them for local runs and Slurm jobs alike).
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string>

#include "core/clock.h"
#include "sweep/planner.h"
#include "sweep/runner.h"

namespace dlscale::sweep::detail {

/// "1h02m", "3m05s", "7s"; "?" when negative.
std::string format_duration(double s);
/// "resnet18 weak w2 b32 tree" and whatever else identifies the run.
std::string describe(const PlannedRun& run);

/// The metric a completed run's progress line shows, with its unit and decimals.
struct Headline {
  const char* metric;
  const char* unit;
  int decimals;
};
Headline headline(const Params& p);

/// The error line of a failed run: dlscale's own, or the log's last line.
std::string failure_detail(const std::string& log);
bool mentions_out_of_memory(const std::string& log);
/// Whether a run that failed with this exit ran out of memory: dlscale says
/// so by its exit code; anything else (or a signal) by its log.
bool ran_out_of_memory(const Params& p, int exit_code, int signal, const std::string& log);
bool process_alive(long long pid);
/// The first 10 hex digits of the text's FNV-1a hash (file names).
std::string short_hash(const std::string& s);

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

/// The sweep's progress: plain lines, or one live status line on a terminal.
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

}  // namespace dlscale::sweep::detail
