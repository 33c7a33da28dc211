#include "sweep/results_store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include "core/error.h"
#include "core/files.h"
#include "process_util.h"

namespace dlscale::sweep {
namespace {

using dlscale::testing::temp_path;

/// A store's file and SQLite's -wal and -shm beside it, removed when the
/// test ends (declared before the store, so after it closes).
struct StoreFiles {
  explicit StoreFiles(const std::string& name) : path(temp_path(name)) {}
  ~StoreFiles() {
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
  }
  const std::string path;
};

RunStart start_of(const std::string& sweep, int batch, long long pid = 1) {
  RunStart s;
  s.sweep = sweep;
  s.params = {{"model", Value("lenet")}, {"batch", Value(batch)}, {"workers", Value(2)}, {"scaling", Value("weak")},
              {"global-batch", Value(2 * batch)}, {"repeats", Value(2)}};
  s.started_at = "2026-01-01T00:00:00.000Z";
  s.host = "h";
  s.pid = pid;
  return s;
}

RepeatRecord repeat(int i, double sps) {
  RepeatRecord r;
  r.repeat = i;
  r.status = kStatusCompleted;
  r.metrics = {{"samples_per_sec", sps}, {"step_time_ms", 1000.0 * 16 / sps}};
  return r;
}

TEST(ResultsStore, RoundTripAndRestart) {
  const StoreFiles files("store.db");
  const std::string& path = files.path;
  {
    ResultsStore store(path);
    const auto id = store.start_run(start_of("s", 8));
    store.add_repeat(id, repeat(1, 100));
    store.add_repeat(id, repeat(2, 110));
    store.finish_run(id, kStatusCompleted, "", "2026-01-01T00:01:00.000Z");
  }
  ResultsStore store(path);  // reopened: everything is there
  auto runs = store.runs();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].status, kStatusCompleted);
  EXPECT_EQ(runs[0].params.at("batch"), Value(8));
  EXPECT_EQ(runs[0].key, run_key(start_of("s", 8).params));
  ASSERT_EQ(runs[0].repeats.size(), 2u);
  EXPECT_EQ(runs[0].repeats[1].metrics.at("samples_per_sec"), 110);
  ASSERT_TRUE(store.find_run("s", runs[0].key).has_value());
  EXPECT_FALSE(store.find_run("other", runs[0].key).has_value());

  // Running it again replaces the earlier attempt and its repeats.
  const auto id = store.start_run(start_of("s", 8));
  EXPECT_EQ(id, runs[0].id);
  runs = store.runs();
  EXPECT_EQ(runs[0].status, kStatusRunning);
  EXPECT_TRUE(runs[0].repeats.empty());
}

TEST(ResultsStore, RefusesFilesThatAreNotStores) {
  const std::string path = temp_path("junk.db");
  write_file_atomic(path, std::string(4096, 'x'));
  try {
    ResultsStore store(path);
    FAIL() << "opened a non-database";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "'" + path + "' is not a dlscale results store (not an SQLite database)");
  }
  std::filesystem::remove(path);
  EXPECT_THROW(ResultsStore("/nonexistent-dir/x.db"), Error);
  // Special files are refused before SQLite touches them (nothing replaced).
  const std::string fifo = temp_path("fifo.db");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const auto& [special, kind] : {std::pair{std::string("/dev/null"), "a character device"},
                                      std::pair{fifo, "a named pipe"},
                                      std::pair{std::filesystem::temp_directory_path().string(), "a directory"}}) {
    try {
      ResultsStore store(special);
      FAIL() << special;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()),
                "results store '" + special + "' is " + kind + ", not a file (--db names an SQLite file)");
    }
  }
  EXPECT_TRUE(std::filesystem::is_fifo(fifo));
  std::filesystem::remove(fifo);
  // A link is followed: the store is made at its target, the link stays.
  const std::string target = temp_path("target.db"), link = temp_path("link.db");
  std::filesystem::create_symlink(target, link);
  { ResultsStore store(link); }
  EXPECT_TRUE(std::filesystem::is_symlink(link));
  EXPECT_TRUE(std::filesystem::is_regular_file(target));
  std::filesystem::remove(link);
  std::filesystem::remove(target);
}

// A row damaged outside dlscale (its parameters are not JSON) is skipped with
// a warning naming it; the other rows still read, and running it again heals it.
TEST(ResultsStore, ADamagedRowIsSkippedAndTheRestStillReads) {
  const StoreFiles files("damaged.db");
  const std::string& path = files.path;
  std::string damaged_key;
  {
    ResultsStore store(path);
    store.start_run(start_of("s", 8));
    store.start_run(start_of("s", 16));
    damaged_key = run_key(start_of("s", 16).params);
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "UPDATE runs SET params = '{\"batch\": [1,' WHERE id = 2", nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  ResultsStore store(path);
  const auto runs = store.runs();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].params.at("batch"), Value(8));
  EXPECT_FALSE(store.find_run("s", damaged_key).has_value());
  store.start_run(start_of("s", 16));  // the sweep runs it again
  EXPECT_EQ(store.runs().size(), 2u);
}

TEST(ResultsStore, ConnectionsOpeningANewStoreTogetherAllSucceed) {
  // Two connections switching a new file to WAL at once get SQLITE_BUSY
  // without the busy handler (it could deadlock); opening retries it.
  constexpr int kConnections = 6;
  for (int round = 0; round < 20; ++round) {
    const StoreFiles files("together.db");
    const std::string& path = files.path;
    std::atomic<int> ready{0};
    std::vector<std::string> errors(kConnections);
    std::vector<std::thread> threads;
    for (int c = 0; c < kConnections; ++c) {
      threads.emplace_back([&, c] {
        ++ready;
        while (ready.load() < kConnections) std::this_thread::yield();
        try {
          ResultsStore store(path);
          store.start_run(start_of("s" + std::to_string(c), 1));
        } catch (const Error& e) {
          errors[c] = e.what();
        }
      });
    }
    for (auto& t : threads) t.join();
    for (const std::string& e : errors) EXPECT_EQ(e, "") << "round " << round;
    EXPECT_EQ(ResultsStore(path).runs().size(), static_cast<std::size_t>(kConnections));
  }
}

TEST(ResultsStore, ConcurrentWritersLoseNothing) {
  const StoreFiles files("concurrent.db");
  const std::string& path = files.path;
  constexpr int kWriters = 4;
  constexpr int kRuns = 40;
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      ResultsStore store(path);  // each writer its own connection, as two sweeps would
      for (int i = 0; i < kRuns; ++i) {
        const auto id = store.start_run(start_of("writer" + std::to_string(w), i + 1, w));
        store.add_repeat(id, repeat(1, 100 + i));
        store.add_repeat(id, repeat(2, 200 + i));
        store.finish_run(id, kStatusCompleted, "", "t");
      }
    });
  }
  for (auto& t : threads) t.join();
  ResultsStore store(path);
  const auto runs = store.runs();
  ASSERT_EQ(runs.size(), static_cast<std::size_t>(kWriters * kRuns));
  for (const RunRecord& r : runs) {
    EXPECT_EQ(r.status, kStatusCompleted);
    ASSERT_EQ(r.repeats.size(), 2u);
    const long long b = param_int(r.params, "batch");
    EXPECT_EQ(r.repeats[0].metrics.at("samples_per_sec"), 99 + b);
    EXPECT_EQ(r.repeats[1].metrics.at("samples_per_sec"), 199 + b);
  }
}

TEST(ResultsStore, SlurmJobIsKeptAndOlderStoresGainItsColumn) {
  const StoreFiles files("slurmjob.db");
  std::int64_t id = 0;
  {
    ResultsStore store(files.path);
    id = store.start_run(start_of("s", 8));
    store.set_slurm_job(id, "4711");
    store.take_over_run(id, "login2", 99);
  }
  {
    ResultsStore store(files.path);
    const auto runs = store.runs();
    ASSERT_EQ(runs.size(), 1u);
    EXPECT_EQ(runs[0].slurm_job, "4711");
    EXPECT_EQ(runs[0].host, "login2");
    EXPECT_EQ(runs[0].pid, 99);
    store.start_run(start_of("s", 8));  // a new attempt forgets the old job
    EXPECT_EQ(store.runs()[0].slurm_job, "");
  }
  // A store written before the column existed.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(files.path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "ALTER TABLE runs DROP COLUMN slurm_job", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  ResultsStore store(files.path);
  store.set_slurm_job(id, "12");
  EXPECT_EQ(store.runs()[0].slurm_job, "12");
}

}  // namespace
}  // namespace dlscale::sweep
