#include "sweep/results_store.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

#include "core/error.h"
#include "core/files.h"
#include "process_util.h"

namespace dlscale::sweep {
namespace {

using dlscale::testing::temp_path;

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
  const std::string path = temp_path("store.db");
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
  std::filesystem::remove(path);
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
}

TEST(ResultsStore, ConcurrentWritersLoseNothing) {
  const std::string path = temp_path("concurrent.db");
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
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
}

}  // namespace
}  // namespace dlscale::sweep
