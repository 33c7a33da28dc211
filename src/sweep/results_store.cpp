#include "sweep/results_store.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "core/text.h"
#include "core/error.h"
#include "core/files.h"
#include "core/log.h"

namespace dlscale::sweep {
namespace {

constexpr const char* kSchemaSql = R"sql(
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs(
  id INTEGER PRIMARY KEY,
  sweep TEXT NOT NULL,
  run_key TEXT NOT NULL,
  kind TEXT, model TEXT, scaling TEXT, workers INTEGER, batch INTEGER, global_batch INTEGER,
  params TEXT NOT NULL,
  status TEXT NOT NULL,
  reason TEXT NOT NULL DEFAULT '',
  started_at TEXT, ended_at TEXT, host TEXT, pid INTEGER, versions TEXT,
  slurm_job TEXT NOT NULL DEFAULT '',
  UNIQUE(sweep, run_key));
CREATE TABLE IF NOT EXISTS repeats(
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  repeat INTEGER NOT NULL,
  status TEXT NOT NULL, reason TEXT NOT NULL DEFAULT '',
  started_at TEXT, ended_at TEXT, wall_s REAL, log_path TEXT, record TEXT,
  PRIMARY KEY(run_id, repeat));
CREATE TABLE IF NOT EXISTS metrics(
  run_id INTEGER NOT NULL, repeat INTEGER NOT NULL, name TEXT NOT NULL, value REAL NOT NULL,
  PRIMARY KEY(run_id, repeat, name),
  FOREIGN KEY(run_id, repeat) REFERENCES repeats(run_id, repeat) ON DELETE CASCADE);
)sql";

/// The store is locked beyond what the busy handler waits for: SQLite
/// returns SQLITE_BUSY at once where waiting could deadlock (two connections
/// switching a new file to WAL together), so opening retries it.
struct BusyError : Error {
  using Error::Error;
};

/// An SQLite failure as a dlscale error: a full disk or a failing device is
/// an IoError (exit 6), a lock a BusyError, anything else names the store's
/// message.
[[noreturn]] void throw_sqlite(sqlite3* db, const std::string& what) {
  const std::string msg = what.empty() ? sqlite3_errmsg(db) : what;
  const int code = sqlite3_errcode(db) & 0xff;
  if (code == SQLITE_FULL) throw IoError(fmt::format("results store: no space left on the device ({})", msg));
  if (code == SQLITE_IOERR) throw IoError(fmt::format("results store: input/output error ({})", msg));
  if (code == SQLITE_BUSY || code == SQLITE_LOCKED) throw BusyError(fmt::format("results store: {}", msg));
  throw Error(fmt::format("results store: {}", msg));
}

/// A prepared statement, finalized on scope exit.
class Statement {
 public:
  Statement(sqlite3* db, const std::string& sql) : db_(db) {
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt_, nullptr) != SQLITE_OK) throw_sqlite(db, "");
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& bind(int i, const std::string& s) {
    sqlite3_bind_text(stmt_, i, s.c_str(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Statement& bind(int i, std::int64_t v) {
    sqlite3_bind_int64(stmt_, i, v);
    return *this;
  }
  Statement& bind(int i, double v) {
    sqlite3_bind_double(stmt_, i, v);
    return *this;
  }
  /// Steps once; true while a row is available.
  bool step() {
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    throw_sqlite(db_, "");
  }
  std::string text(int col) const {
    const unsigned char* t = sqlite3_column_text(stmt_, col);
    return t ? reinterpret_cast<const char*>(t) : "";
  }
  std::int64_t int64(int col) const { return sqlite3_column_int64(stmt_, col); }
  double real(int col) const { return sqlite3_column_double(stmt_, col); }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

/// BEGIN IMMEDIATE … COMMIT; rolls back when an exception leaves the scope.
class Transaction {
 public:
  explicit Transaction(sqlite3* db) : db_(db) {
    run("BEGIN IMMEDIATE");
  }
  ~Transaction() {
    if (!committed_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  void commit() {
    run("COMMIT");
    committed_ = true;
  }

 private:
  void run(const char* sql) {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
      const std::string msg = err ? err : "unknown error";
      sqlite3_free(err);
      throw_sqlite(db_, fmt::format("{}: {}", sql, msg));
    }
  }
  sqlite3* db_;
  bool committed_ = false;
};

std::string text_or(const Params& p, const char* name) { return param_text(p, name, ""); }
std::int64_t int_or(const Params& p, const char* name) {
  const Value v = param_or(p, name, Value(0));
  return v.is_number() ? static_cast<std::int64_t>(v.number()) : 0;
}

}  // namespace

namespace {

/// A store is a regular file (or nothing yet, or a link to one: links are
/// followed as for every output path). SQLite on a device, a pipe or a
/// directory fails with a raw I/O error, or worse, writes through a device.
void check_store_path(const std::string& path) {
  const std::string kind = special_file_kind(path);  // nothing there: created (or refused) by SQLite
  DLSCALE_CHECK(kind.empty(), "results store '{}' is {}, not a file (--db names an SQLite file)", path, kind);
}

}  // namespace

ResultsStore::ResultsStore(const std::string& path) : path_(path) {
  check_store_path(path);
  const int rc = sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                                 nullptr);
  if (rc != SQLITE_OK) {
    const std::string msg = db_ ? sqlite3_errmsg(db_) : "cannot allocate";
    sqlite3_close(db_);
    db_ = nullptr;
    throw Error(fmt::format("cannot open results store '{}': {}", path, msg));
  }
  sqlite3_busy_timeout(db_, 60000);
  try {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    for (int attempt = 1;; ++attempt) {
      try {
        prepare_schema();
        break;
      } catch (const BusyError&) {
        if (std::chrono::steady_clock::now() > deadline) throw;
        std::this_thread::sleep_for(std::chrono::milliseconds(std::min(100, 5 * attempt)));
      }
    }
  } catch (const IoError& e) {
    sqlite3_close(db_);
    db_ = nullptr;
    const std::string msg = e.what();
    const std::string prefix = "results store: ";
    throw IoError(fmt::format("results store '{}': {}", path,
                              msg.rfind(prefix, 0) == 0 ? msg.substr(prefix.size()) : msg));
  } catch (const Error& e) {
    sqlite3_close(db_);
    db_ = nullptr;
    const std::string msg = e.what();
    if (msg.find("file is not a database") != std::string::npos) {
      throw Error(fmt::format("'{}' is not a dlscale results store (not an SQLite database)", path));
    }
    throw Error(msg.find(path) != std::string::npos ? msg : fmt::format("results store '{}': {}", path, msg));
  }
}

ResultsStore::~ResultsStore() { sqlite3_close(db_); }

void ResultsStore::prepare_schema() {
  exec("PRAGMA foreign_keys = ON");
  {
    Statement wal(db_, "PRAGMA journal_mode = WAL");
    wal.step();
  }
  exec("PRAGMA synchronous = NORMAL");
  Transaction tx(db_);
  exec(kSchemaSql);
  Statement get(db_, "SELECT value FROM meta WHERE key = 'schema'");
  if (get.step()) {
    DLSCALE_CHECK(get.text(0) == kSchema, "'{}' holds results of schema '{}'; this dlscale reads '{}'", path_,
                  get.text(0), kSchema);
  } else {
    Statement(db_, "INSERT INTO meta(key, value) VALUES('schema', ?)").bind(1, std::string(kSchema)).step();
  }
  add_missing_columns();
  tx.commit();
}

void ResultsStore::add_missing_columns() {
  // Stores written before launcher slurm lack runs.slurm_job.
  Statement cols(db_, "SELECT count(*) FROM pragma_table_info('runs') WHERE name = 'slurm_job'");
  DLSCALE_ASSERT(cols.step());
  if (cols.int64(0) == 0) exec("ALTER TABLE runs ADD COLUMN slurm_job TEXT NOT NULL DEFAULT ''");
}

void ResultsStore::exec(const std::string& sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    const std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    throw_sqlite(db_, msg);
  }
}

namespace {

constexpr const char* kRunColumns =
    "SELECT id, sweep, run_key, params, status, reason, started_at, ended_at, host, pid, versions, slurm_job "
    "FROM runs ";

/// Reads the row at `q`; nullopt (after a warning naming the row) when its
/// stored parameters are not what dlscale wrote, so one damaged row does
/// not make the whole store unreadable.
std::optional<RunRecord> read_run(const Statement& q, const std::string& path) {
  RunRecord r;
  r.id = q.int64(0);
  r.sweep = q.text(1);
  r.key = q.text(2);
  const nlohmann::json params = nlohmann::json::parse(q.text(3), nullptr, false);
  try {
    DLSCALE_CHECK(!params.is_discarded(), "its parameters are not valid JSON");
    r.params = params_from_json(params);
  } catch (const Error& e) {
    DLSCALE_LOG_WARN("results store {}: skipping run {} of sweep '{}': {}", path, r.id, r.sweep, e.what());
    return std::nullopt;
  }
  r.status = q.text(4);
  r.reason = q.text(5);
  r.started_at = q.text(6);
  r.ended_at = q.text(7);
  r.host = q.text(8);
  r.pid = q.int64(9);
  r.versions = nlohmann::json::parse(q.text(10), nullptr, false);
  if (r.versions.is_discarded()) r.versions = nlohmann::json::object();
  r.slurm_job = q.text(11);
  return r;
}

}  // namespace

std::optional<RunRecord> ResultsStore::find_run(const std::string& sweep, const std::string& key) {
  Statement q(db_, std::string(kRunColumns) + "WHERE sweep = ? AND run_key = ?");
  q.bind(1, sweep).bind(2, key);
  if (!q.step()) return std::nullopt;
  return read_run(q, path_);  // a damaged row is run again, which rewrites it
}

std::optional<std::int64_t> ResultsStore::claim_run(const RunStart& start, const ClaimPolicy& may_start) {
  Transaction tx(db_);
  if (!may_start(find_run(start.sweep, run_key(start.params)))) return std::nullopt;
  const std::int64_t id = upsert_run_locked(start, kStatusRunning, "");
  tx.commit();
  return id;
}

std::int64_t ResultsStore::upsert_run(const RunStart& s, const std::string& status, const std::string& reason) {
  Transaction tx(db_);
  const std::int64_t id = upsert_run_locked(s, status, reason);
  tx.commit();
  return id;
}

std::int64_t ResultsStore::upsert_run_locked(const RunStart& s, const std::string& status, const std::string& reason) {
  const std::string key = run_key(s.params);
  Statement del(db_, "DELETE FROM repeats WHERE run_id = (SELECT id FROM runs WHERE sweep = ? AND run_key = ?)");
  del.bind(1, s.sweep).bind(2, key).step();
  Statement up(db_,
               "INSERT INTO runs(sweep, run_key, kind, model, scaling, workers, batch, global_batch, params, status, "
               "reason, started_at, ended_at, host, pid, versions) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,'',?,?,?) "
               "ON CONFLICT(sweep, run_key) DO UPDATE SET params = excluded.params, status = excluded.status, "
               "reason = excluded.reason, started_at = excluded.started_at, ended_at = '', host = excluded.host, "
               "pid = excluded.pid, versions = excluded.versions, slurm_job = ''");
  up.bind(1, s.sweep).bind(2, key).bind(3, text_or(s.params, "kind")).bind(4, text_or(s.params, "model"));
  up.bind(5, text_or(s.params, "scaling")).bind(6, int_or(s.params, "workers")).bind(7, int_or(s.params, "batch"));
  up.bind(8, int_or(s.params, "global-batch")).bind(9, dump_json(to_json(s.params))).bind(10, status).bind(11, reason);
  up.bind(12, s.started_at).bind(13, s.host).bind(14, static_cast<std::int64_t>(s.pid)).bind(15, dump_json(s.versions));
  up.step();
  Statement id(db_, "SELECT id FROM runs WHERE sweep = ? AND run_key = ?");
  id.bind(1, s.sweep).bind(2, key);
  DLSCALE_ASSERT(id.step());
  return id.int64(0);
}

std::int64_t ResultsStore::start_run(const RunStart& start) { return upsert_run(start, kStatusRunning, ""); }

void ResultsStore::set_slurm_job(std::int64_t run_id, const std::string& job) {
  Transaction tx(db_);
  Statement(db_, "UPDATE runs SET slurm_job = ? WHERE id = ?").bind(1, job).bind(2, run_id).step();
  tx.commit();
}

void ResultsStore::take_over_run(std::int64_t run_id, const std::string& host, long long pid) {
  Transaction tx(db_);
  Statement up(db_, "UPDATE runs SET host = ?, pid = ? WHERE id = ?");
  up.bind(1, host).bind(2, static_cast<std::int64_t>(pid)).bind(3, run_id).step();
  tx.commit();
}

void ResultsStore::add_repeat(std::int64_t run_id, const RepeatRecord& r) {
  Transaction tx(db_);
  Statement ins(db_,
                "INSERT OR REPLACE INTO repeats(run_id, repeat, status, reason, started_at, ended_at, wall_s, "
                "log_path, record) VALUES(?,?,?,?,?,?,?,?,?)");
  ins.bind(1, run_id).bind(2, static_cast<std::int64_t>(r.repeat)).bind(3, r.status).bind(4, r.reason);
  ins.bind(5, r.started_at).bind(6, r.ended_at).bind(7, r.wall_s).bind(8, r.log_path).bind(9, r.record);
  ins.step();
  for (const auto& [name, value] : r.metrics) {
    Statement m(db_, "INSERT OR REPLACE INTO metrics(run_id, repeat, name, value) VALUES(?,?,?,?)");
    m.bind(1, run_id).bind(2, static_cast<std::int64_t>(r.repeat)).bind(3, name).bind(4, value);
    m.step();
  }
  tx.commit();
}

void ResultsStore::finish_run(std::int64_t run_id, const std::string& status, const std::string& reason,
                              const std::string& ended_at, const nlohmann::json& versions) {
  Transaction tx(db_);
  Statement up(db_, "UPDATE runs SET status = ?, reason = ?, ended_at = ? WHERE id = ?");
  up.bind(1, status).bind(2, reason).bind(3, ended_at).bind(4, run_id);
  up.step();
  if (!versions.is_null()) {
    Statement v(db_, "UPDATE runs SET versions = ? WHERE id = ?");
    v.bind(1, dump_json(versions)).bind(2, run_id);
    v.step();
  }
  tx.commit();
}

std::vector<RunRecord> ResultsStore::runs(const std::string& sweep, bool with_repeats) {
  std::vector<RunRecord> out;
  std::map<std::int64_t, std::size_t> by_id;
  {
    Statement q(db_, std::string(kRunColumns) + "WHERE (? = '' OR sweep = ?) ORDER BY id");
    q.bind(1, sweep).bind(2, sweep);
    while (q.step()) {
      std::optional<RunRecord> r = read_run(q, path_);
      if (!r) continue;
      by_id[r->id] = out.size();
      out.push_back(std::move(*r));
    }
  }
  if (!with_repeats) return out;
  Statement reps(db_,
                 "SELECT run_id, repeat, status, reason, started_at, ended_at, wall_s, log_path, record FROM repeats "
                 "ORDER BY run_id, repeat");
  while (reps.step()) {
    const auto it = by_id.find(reps.int64(0));
    if (it == by_id.end()) continue;
    RepeatRecord r;
    r.repeat = static_cast<int>(reps.int64(1));
    r.status = reps.text(2);
    r.reason = reps.text(3);
    r.started_at = reps.text(4);
    r.ended_at = reps.text(5);
    r.wall_s = reps.real(6);
    r.log_path = reps.text(7);
    r.record = reps.text(8);
    out[it->second].repeats.push_back(std::move(r));
  }
  Statement met(db_, "SELECT run_id, repeat, name, value FROM metrics ORDER BY run_id, repeat, name");
  while (met.step()) {
    const auto it = by_id.find(met.int64(0));
    if (it == by_id.end()) continue;
    for (RepeatRecord& r : out[it->second].repeats) {
      if (r.repeat == met.int64(1)) r.metrics[met.text(2)] = met.real(3);
    }
  }
  return out;
}

}  // namespace dlscale::sweep
