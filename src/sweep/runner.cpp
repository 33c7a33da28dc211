#include "sweep/runner.h"

#include <signal.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <filesystem>
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

/// What a dlscale record says about the software and machine it ran on.
void add_program_versions(const std::string& record, nlohmann::json& versions) {
  const nlohmann::json j = nlohmann::json::parse(record, nullptr, false);
  if (j.is_discarded() || !j.contains("environment") || !j["environment"].is_object()) return;
  for (const char* k : {"torch_version", "blas", "compiler", "cpu_model", "os", "git_revision"}) {
    if (j["environment"].contains(k)) versions[k] = j["environment"][k];
  }
}

std::string short_hash(const std::string& s) {
  return fmt::format("{:016x}", fnv1a(s.data(), s.size())).substr(0, 10);
}

}  // namespace

std::vector<std::string> split_command(const std::string& text) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  char quote = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quote) {
      if (c == quote) {
        quote = 0;
      } else if (c == '\\' && quote == '"' && i + 1 < text.size()) {
        word += text[++i];
      } else {
        word += c;
      }
    } else if (c == '$' && i + 1 < text.size() && text[i + 1] == '(') {
      // A $( expression ) stays one piece of the word, spaces and all.
      const std::size_t j = closing_paren(text, i + 1);
      DLSCALE_CHECK(j != std::string::npos, "command '{}': '$(' at position {} has no closing ')'", text, i + 1);
      word += text.substr(i, j - i + 1);
      i = j;
      in_word = true;
    } else if (c == '\'' || c == '"') {
      quote = c;
      in_word = true;
    } else if (c == '\\' && i + 1 < text.size()) {
      word += text[++i];
      in_word = true;
    } else if (std::isspace(static_cast<unsigned char>(c))) {
      if (in_word) words.push_back(word);
      word.clear();
      in_word = false;
    } else {
      word += c;
      in_word = true;
    }
  }
  DLSCALE_CHECK(!quote, "command '{}': unbalanced {} quote", text, quote);
  if (in_word) words.push_back(word);
  DLSCALE_CHECK(!words.empty(), "parameter 'command' is empty");
  return words;
}

namespace {
constexpr long long kRepeatSeedStride = 1000;
constexpr std::array<const char*, 4> kEvaluating = {"target-accuracy", "epochs", "eval-every",
                                                    "eval-every-steps"};
}  // namespace

Params repeat_params(const Params& p, int repeat) {
  const bool evaluates = std::any_of(kEvaluating.begin(), kEvaluating.end(),
                                     [&](const char* name) { return p.count(name) > 0; });
  if (repeat <= 1 || param_text(p, "kind", "dlscale") != "dlscale" || !evaluates) return p;
  Params out = p;
  const long long seed = p.count("seed") ? param_int(p, "seed") : kDefaultSeed;
  out["seed"] = Value(seed + kRepeatSeedStride * (repeat - 1));
  return out;
}

std::vector<std::string> build_command(const Params& p, const std::string& dlscale_binary,
                                       const std::string& record_path) {
  const std::string launcher = param_text(p, "launcher", "local");
  const long long workers = param_int(p, "workers");
  std::vector<std::string> argv;
  if (launcher == "mpirun") argv = {"mpirun", "-np", std::to_string(workers)};
  if (launcher == "srun") argv = {"srun", "-n", std::to_string(workers)};
  // launcher cluster with cluster-launcher mpirun: mpirun across the hosts
  // (dlscale cluster mpirun), the ranks told nothing of the cluster.
  const bool cluster_mpirun = launcher == "cluster" && param_text(p, "cluster-launcher", "dlscale") == "mpirun";
  if (cluster_mpirun) {
    argv = {dlscale_binary, "cluster", "mpirun", "--name", param_text(p, "cluster"), "--workers-per-host",
            param_text(p, "workers-per-host")};
  }
  if (const auto it = p.find("launcher-args"); it != p.end() && launcher != "local") {
    if (cluster_mpirun) argv.insert(argv.end(), {"--mpirun-args", it->second.to_string()});
    if (!cluster_mpirun) {
      for (const std::string& w : split_command(it->second.to_string())) argv.push_back(w);
    }
  }
  if (cluster_mpirun) argv.push_back("--");
  if (param_text(p, "kind") == "external") {
    const Lookup lookup = [&](const std::string& name) -> Value {
      const auto found = p.find(name);
      DLSCALE_CHECK(found != p.end(), "parameter 'command': unknown name '{}' in ${{{}}}", name, name);
      return found->second;
    };
    for (const std::string& word : split_command(param_text(p, "command"))) {
      argv.push_back(expand_template(word, lookup).to_string());
    }
    return argv;
  }
  const bool commbench = param_text(p, "kind") == "commbench";
  argv.push_back(dlscale_binary);
  argv.push_back(commbench ? "commbench" : "train");
  for (const auto& [name, value] : p) {
    if (!is_train_option(name)) continue;
    if (cluster_mpirun && (name == "cluster" || name == "workers-per-host")) continue;
    if (value.is_bool()) {
      if (value.boolean()) argv.push_back("--" + name);
      continue;
    }
    argv.push_back("--" + name);
    argv.push_back(value.to_string());
  }
  if (commbench) {
    // no batch
  } else if (param_text(p, "scaling") == "strong") {
    argv.insert(argv.end(), {"--global-batch", param_text(p, "global-batch")});
  } else {
    argv.insert(argv.end(), {"--batch", param_text(p, "batch")});
  }
  if (const auto it = p.find("train-timeout"); it != p.end()) {
    argv.insert(argv.end(), {"--timeout", it->second.to_string()});
  }
  if (launcher == "local") argv.insert(argv.end(), {"--workers", std::to_string(workers)});
  argv.insert(argv.end(), {"--json", record_path});
  return argv;
}

namespace {

/// A commbench record's rows and fits as metrics: "busbw_gbps/allreduce/1048576",
/// "alpha_us/allreduce", ...; plus the peak busbw over every row.
std::map<std::string, double> commbench_metrics(const nlohmann::json& j) {
  std::map<std::string, double> m;
  DLSCALE_CHECK(j.value("schema", "") == "dlscale.commbench/1" && j.contains("results"),
                "the run's JSON record is not a dlscale commbench record");
  const nlohmann::json& r = j["results"];
  double peak = 0;
  const nlohmann::json rows = r.value("rows", nlohmann::json::array());
  const nlohmann::json fits = r.value("fits", nlohmann::json::object());
  for (const auto& row : rows) {
    const std::string at = fmt::format("{}/{}", row.value("op", "?"), row.value("bytes", 0ll));
    for (const char* k : {"time_us", "algbw_gbps", "busbw_gbps"}) {
      if (row.contains(k) && row[k].is_number()) m[fmt::format("{}/{}", k, at)] = row[k].get<double>();
    }
    peak = std::max(peak, row.value("busbw_gbps", 0.0));
  }
  for (const auto& [op, fit] : fits.items()) {
    m["alpha_us/" + op] = fit.value("alpha_us", 0.0);
    m["bandwidth_gbps/" + op] = fit.value("bandwidth_gbps", 0.0);
  }
  m["wrong"] = r.value("wrong", 0.0);
  DLSCALE_CHECK(m["wrong"] == 0, "commbench found {} wrong element(s)", m["wrong"]);
  m["busbw_gbps_peak"] = peak;
  return m;
}

}  // namespace

std::map<std::string, double> extract_metrics(const Params& p, const std::string& record_json,
                                              const std::string& log_text) {
  const bool commbench = param_text(p, "kind") == "commbench";
  const double global_batch = commbench ? 0.0 : static_cast<double>(param_int(p, "global-batch"));
  std::map<std::string, double> m;
  if (param_text(p, "kind") == "external") {
    const std::string pattern = param_text(p, "throughput-pattern", kDefaultThroughputPattern);
    const std::string last = last_throughput_match(pattern, log_text);
    DLSCALE_CHECK(!last.empty(), "no line of the output matches the throughput pattern '{}'", pattern);
    double sps = 0;
    try {
      sps = std::stod(last);
    } catch (const std::exception&) {
      throw Error(fmt::format("the throughput pattern matched '{}', which is not a number", last));
    }
    DLSCALE_CHECK(sps > 0, "the throughput pattern matched '{}'; samples/s must be > 0", last);
    m["samples_per_sec"] = sps;
    m["step_time_ms"] = 1000.0 * global_batch / sps;
    return m;
  }
  const nlohmann::json j = nlohmann::json::parse(record_json, nullptr, false);
  DLSCALE_CHECK(!j.is_discarded() && j.contains("results"), "the run's JSON record is missing or not valid JSON");
  if (commbench) return commbench_metrics(j);
  const nlohmann::json& r = j["results"];
  auto take = [&](const std::string& name, const nlohmann::json& v) {
    if (v.is_number()) m[name] = v.get<double>();
  };
  for (const char* k : {"samples_per_sec", "samples_per_sec_jitter", "samples_per_sec_uncertainty",
                        "step_time_mean_ms", "step_time_p50_ms", "step_time_p95_ms", "wall_seconds"}) {
    if (r.contains(k)) take(k, r[k]);
  }
  DLSCALE_CHECK(m.count("samples_per_sec") && m["samples_per_sec"] > 0, "the run's JSON record has no samples_per_sec");
  m["step_time_ms"] = 1000.0 * global_batch / m["samples_per_sec"];
  if (r.contains("breakdown_ms")) {
    for (const auto& [phase, v] : r["breakdown_ms"].items()) take("breakdown_" + phase + "_ms", v);
  }
  if (r.contains("comm") && r["comm"].is_object()) {
    const nlohmann::json& c = r["comm"];
    for (const char* k : {"bytes_per_step", "busy_ms_p50", "algbw_gbps", "busbw_gbps"}) {
      if (c.contains(k)) take(std::string("comm_") + k, c[k]);
    }
    // Max over ranks of the bytes each sent per step (formula, TCP counters).
    for (const char* k : {"bytes_sent_per_step_formula", "bytes_sent_per_step_tcp"}) {
      if (!c.contains(k) || !c[k].is_array()) continue;
      for (const auto& v : c[k]) {
        const std::string name = std::string("comm_") + k;
        if (v.is_number()) m[name] = std::max(m.count(name) ? m[name] : 0.0, v.get<double>());
      }
    }
    if (c.contains("replicas_identical") && c["replicas_identical"].is_boolean()) {
      m["comm_replicas_identical"] = c["replicas_identical"].get<bool>() ? 1.0 : 0.0;
    }
  }
  // Parameter server: the busiest shard's bytes and time, the imbalance and
  // the staleness (docs/metrics.md).
  if (r.contains("ps") && r["ps"].is_object()) {
    for (const auto& [k, v] : r["ps"].items()) take("ps_" + k, v);
  }
  // The input pipeline: pipeline time per batch, staging, skipped samples.
  if (r.contains("data") && r["data"].is_object()) {
    for (const auto& [k, v] : r["data"].items()) take("data_" + k, v);
  }
  // Convergence: time to accuracy, epochs, final accuracy; conv_success is
  // 1 when the target was reached, 0 when the run was aborted.
  if (r.contains("convergence") && r["convergence"].is_object()) {
    const nlohmann::json& c = r["convergence"];
    for (const auto& [k, v] : c.items()) take("conv_" + k, v);
    if (c.contains("status") && c["status"].is_string() && !c["status"].get<std::string>().empty()) {
      m["conv_success"] = c["status"] == "success" ? 1.0 : 0.0;
    }
  }
  return m;
}

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

}  // namespace

SweepOutcome run_sweep(const std::vector<PlannedRun>& plan, ResultsStore& store, const SweepRunOptions& o) {
  SweepOutcome outcome;
  outcome.planned = static_cast<int>(plan.size());
  check_sweep_name(o.sweep_name);
  const std::filesystem::path dir = std::filesystem::path(o.output_dir) / o.sweep_name;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  DLSCALE_CHECK(!ec, "cannot create the run output directory '{}': {}", dir.string(), ec.message());

  // What the store already holds decides what runs; earlier out-of-memory
  // failures of this sweep count for the DLBS rule.
  OomRule oom;
  std::map<std::string, RunRecord> stored;  // at the start, for the count of runs to run
  for (RunRecord& r : store.runs(o.sweep_name, false)) {
    if (r.status == kStatusOom) oom.record(r.params);
    stored.emplace(r.key, std::move(r));
  }
  auto needs_run = [&](const std::optional<RunRecord>& stored_run, std::string* why_not) {
    if (!stored_run || o.rerun == Rerun::kAll) return true;
    const RunRecord& r = *stored_run;
    if (r.status == kStatusRunning && r.pid != o.pid && r.host == o.host && process_alive(r.pid)) {
      *why_not = fmt::format("running in another sweep (pid {})", r.pid);
      return false;
    }
    if (r.status == kStatusRunning || r.status == kStatusInterrupted) return true;
    if (r.status != kStatusCompleted && o.rerun == Rerun::kFailed) return true;
    *why_not = fmt::format("already {} in {}", r.status, store.path());
    return false;
  };

  int repeats_to_run = 0;
  int to_run = 0;
  for (const PlannedRun& run : plan) {
    std::string unused;
    const auto it = stored.find(run.key);
    if (!run.skipped() && needs_run(it == stored.end() ? std::nullopt : std::optional<RunRecord>(it->second), &unused)) {
      repeats_to_run += static_cast<int>(param_int(run.params, "repeats"));
      ++to_run;
    }
  }
  Progress progress(o, repeats_to_run);
  progress.line(fmt::format("sweep '{}': {} run(s) planned, {} to run, results in {}", o.sweep_name, plan.size(),
                            to_run, store.path()));

  std::set<std::string> made;  // clusters this sweep used, removed at its end
  const int n = static_cast<int>(plan.size());
  for (const PlannedRun& run : plan) {
    if (o.keep_going && !o.keep_going()) {
      outcome.interrupted = true;
      break;
    }
    const std::string tag = fmt::format("[{}/{}] {}", run.index, n, describe(run));
    if (run.skipped()) {
      ++outcome.skipped;
      progress.line(fmt::format("{}: skipped: {}", tag, run.skip_reason));
      continue;
    }
    // Checked against the store as it is now, in the transaction that starts
    // the run: another sweep of the same file may have run it meanwhile.
    std::string why_not;
    const RunStart start{o.sweep_name, run.params, utc_timestamp(), o.host, o.pid, o.versions};
    const std::optional<std::int64_t> claimed =
        store.claim_run(start, [&](const std::optional<RunRecord>& r) { return needs_run(r, &why_not); });
    if (!claimed) {
      ++outcome.already_done;
      progress.line(fmt::format("{}: {}", tag, why_not));
      continue;
    }
    const std::int64_t run_id = *claimed;
    if (const std::string reason = oom.skip_reason(run.params); !reason.empty()) {
      store.finish_run(run_id, kStatusSkipped, reason, start.started_at);
      ++outcome.skipped;
      progress.line(fmt::format("{}: skipped: {}", tag, reason));
      continue;
    }
    ++outcome.executed;
    const int repeats = static_cast<int>(param_int(run.params, "repeats"));
    const double timeout = param_or(run.params, "timeout", Value(600)).number();
    std::string status = kStatusCompleted;
    std::string reason;
    std::vector<double> rates;
    nlohmann::json versions = o.versions;
    for (int rep = 1; rep <= repeats && status == kStatusCompleted; ++rep) {
      const std::string stem = fmt::format("{:04}-{}-r{}", run.index, short_hash(run.key), rep);
      RepeatRecord rec;
      rec.repeat = rep;
      rec.log_path = (dir / (stem + ".log")).string();
      const std::string record_path = (dir / (stem + ".json")).string();
      std::filesystem::remove(record_path, ec);
      rec.started_at = utc_timestamp();
      const std::string what = fmt::format("{} repeat {}/{}", tag, rep, repeats);
      if (!o.live_progress) progress.line(what + " ...");
      SubprocessResult result;
      try {
        if (param_text(run.params, "launcher") == "cluster") bring_up_cluster(run.params, made, progress);
        SubprocessOptions so;
        so.argv = build_command(repeat_params(run.params, rep), o.dlscale_binary, record_path);
        so.log_path = rec.log_path;
        so.timeout_s = timeout;
        const double t0 = now_seconds();
        so.on_tick = [&] {
          progress.live(what, now_seconds() - t0);
          return !o.keep_going || o.keep_going();
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
      if (result.ok()) {
        try {
          rec.metrics = extract_metrics(run.params, rec.record, log);
          rec.status = kStatusCompleted;
          rates.push_back(rec.metrics[headline(run.params).metric]);
          add_program_versions(rec.record, versions);
        } catch (const Error& e) {
          rec.status = kStatusFailed;
          rec.reason = e.what();
        }
      } else if (result.interrupted) {
        rec.status = kStatusInterrupted;
        rec.reason = "interrupted by the user";
        outcome.interrupted = true;
      } else if (result.timed_out) {
        rec.status = kStatusTimeout;
        rec.reason = result.describe(timeout);
      } else {
        const bool is_oom = param_text(run.params, "kind") == "dlscale" && result.signal == 0
                                ? result.exit_code == kExitOutOfMemory
                                : mentions_out_of_memory(log);
        rec.status = is_oom ? kStatusOom : kStatusFailed;
        const std::string detail = failure_detail(log);
        rec.reason = result.describe(timeout) + (detail.empty() ? "" : ": " + detail);
      }
      store.add_repeat(run_id, rec);
      progress.repeat_done(rec.wall_s);
      if (rec.status != kStatusCompleted) {
        status = rec.status;
        reason = fmt::format("repeat {}: {}", rep, rec.reason);
      }
    }
    store.finish_run(run_id, status, reason, utc_timestamp(), versions);
    if (status == kStatusCompleted) {
      ++outcome.completed;
      const Headline h = headline(run.params);
      progress.line(fmt::format("{}: completed, {:.{}f} {} (median of {})", tag, median(rates),
                                h.decimals, h.unit, rates.size()));
    } else {
      if (status == kStatusOom) oom.record(run.params);
      if (status != kStatusInterrupted) ++outcome.failed;
      progress.line(fmt::format("{}: {}: {} (log: {})", tag, status, reason,
                                (dir / fmt::format("{:04}-{}-r*.log", run.index, short_hash(run.key))).string()));
    }
    if (outcome.interrupted) break;
  }
  for (const std::string& name : made) {
    try {
      cluster::cluster_down(name);
      progress.line(fmt::format("sweep '{}': removed cluster '{}'", o.sweep_name, name));
    } catch (const Error& e) {
      progress.line(fmt::format("sweep '{}': could not remove cluster '{}': {}", o.sweep_name, name, e.what()));
    }
  }
  progress.line(fmt::format("sweep '{}': {} completed, {} failed, {} skipped, {} already done of {} planned, in {}{}",
                            o.sweep_name, outcome.completed, outcome.failed, outcome.skipped, outcome.already_done,
                            outcome.planned, format_duration(progress.elapsed()),
                            outcome.interrupted ? " (interrupted)" : ""));
  return outcome;
}

}  // namespace dlscale::sweep
