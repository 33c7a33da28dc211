#pragma once
// The results store: one SQLite file (default dlscale-results.db) holding
// every run of every sweep, its repeats and their metrics (docs/results.md).
// WAL journal and one transaction per write, so two sweeps can write the
// same file and a sweep killed mid-run loses nothing already recorded.
#include <sqlite3.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "sweep/params.h"

namespace dlscale::sweep {

/// Run and repeat statuses.
inline constexpr const char* kStatusRunning = "running";
inline constexpr const char* kStatusCompleted = "completed";
inline constexpr const char* kStatusFailed = "failed";
inline constexpr const char* kStatusTimeout = "timeout";
inline constexpr const char* kStatusOom = "oom";
inline constexpr const char* kStatusSkipped = "skipped";
inline constexpr const char* kStatusInterrupted = "interrupted";

struct RepeatRecord {
  int repeat = 0;  ///< 1-based
  std::string status;
  std::string reason;
  std::string started_at;
  std::string ended_at;
  double wall_s = 0;
  std::string log_path;
  std::string record;  ///< the program's JSON result record, when it wrote one
  std::map<std::string, double> metrics;  ///< docs/results.md lists the names
};

struct RunRecord {
  std::int64_t id = 0;
  std::string sweep;
  std::string key;
  Params params;
  std::string status;
  std::string reason;
  std::string started_at;
  std::string ended_at;
  std::string host;
  long long pid = 0;
  nlohmann::json versions;
  /// launcher slurm: the job of its latest repeat ("" otherwise).
  std::string slurm_job;
  std::vector<RepeatRecord> repeats;
};

/// What start_run records about who runs it.
struct RunStart {
  std::string sweep;
  Params params;
  std::string started_at;
  std::string host;
  long long pid = 0;
  nlohmann::json versions = nlohmann::json::object();
};

class ResultsStore {
 public:
  static constexpr const char* kSchema = "dlscale.results/1";

  /// Opens or creates the store; throws dlscale::Error naming the file when
  /// it cannot be opened or is not a dlscale results store.
  explicit ResultsStore(const std::string& path);
  ~ResultsStore();
  ResultsStore(const ResultsStore&) = delete;
  ResultsStore& operator=(const ResultsStore&) = delete;

  /// The run of `sweep` with this key (without repeats), if stored.
  std::optional<RunRecord> find_run(const std::string& sweep, const std::string& key);
  /// Records a run as running (replacing an earlier attempt and its
  /// repeats); returns its id.
  std::int64_t start_run(const RunStart& start);
  /// Decides from what the store holds for a run (nothing: nullopt) whether
  /// it may start.
  using ClaimPolicy = std::function<bool(const std::optional<RunRecord>& stored)>;
  /// start_run, if `may_start` agrees, in one transaction with the check:
  /// two sweeps of the same file never both start the same run. Returns the
  /// run's id, or nullopt when it was not started.
  std::optional<std::int64_t> claim_run(const RunStart& start, const ClaimPolicy& may_start);
  /// Records the Slurm job running the run's current repeat (launcher slurm).
  void set_slurm_job(std::int64_t run_id, const std::string& job);
  /// Makes this sweep (host, pid) the run's owner, keeping its repeats: a
  /// resumed sweep following a Slurm job that an earlier one submitted.
  void take_over_run(std::int64_t run_id, const std::string& host, long long pid);
  /// Adds one repeat and its metrics (one transaction).
  void add_repeat(std::int64_t run_id, const RepeatRecord& repeat);
  /// Records how the run ended; `versions`, when not null, replaces the
  /// run's versions (the runner adds what the program reported about itself).
  void finish_run(std::int64_t run_id, const std::string& status, const std::string& reason,
                  const std::string& ended_at, const nlohmann::json& versions = nullptr);
  /// Every stored run, oldest first, optionally of one sweep only.
  std::vector<RunRecord> runs(const std::string& sweep = "", bool with_repeats = true);

  const std::string& path() const { return path_; }

 private:
  void exec(const std::string& sql);
  /// WAL mode and the schema (created, or checked to be ours); idempotent.
  void prepare_schema();
  /// Columns added since schema 1 was first written (ALTER TABLE).
  void add_missing_columns();
  /// Inserts or resets the run; the caller holds a transaction.
  std::int64_t upsert_run_locked(const RunStart& start, const std::string& status, const std::string& reason);
  std::int64_t upsert_run(const RunStart& start, const std::string& status, const std::string& reason);

  std::string path_;
  sqlite3* db_ = nullptr;
};

}  // namespace dlscale::sweep
