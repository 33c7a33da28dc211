#include "sweep/runner.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "core/files.h"
#include "process_util.h"
#include "sweep/planner.h"

namespace dlscale::sweep {
namespace {

using dlscale::testing::temp_path;

/// A sweep of `sh -c` commands: each run appends its name to a counter file
/// (so the test sees what ran) and prints a throughput, fails, times out or
/// runs out of memory as the extensions say.
struct Fixture {
  std::string dir = temp_path("runner");
  std::string db = dir + "/results.db";
  std::string counter = dir + "/ran.txt";
  Fixture() { std::filesystem::create_directories(dir); }
  ~Fixture() { dlscale::remove_tree(dir); }

  std::string yaml(const std::string& extra = "") const {
    return R"Y(
name: t
parameters:
  kind: external
  model: m
  timeout: 2
  repeats: 2
  command: "sh -c 'echo ${_id} >> )Y" + counter + R"Y(; echo $( 10 * ${workers} ) samples/s'"
  _id: "w${workers}b${batch}"
variables:
  workers: [1, 2]
  batch: [8, 16, 32]
)Y" + extra;
  }

  bool interleave = false;
  std::function<bool()> keep_going;

  SweepOutcome run(const std::string& text, Rerun rerun = Rerun::kNone, std::string* out_text = nullptr) const {
    const auto plan = plan_sweep(parse_sweep(text, "t.yaml"), {});
    ResultsStore store(db);
    std::ostringstream out;
    SweepRunOptions o;
    o.sweep_name = "t";
    o.output_dir = dir + "/runs";
    o.rerun = rerun;
    o.out = &out;
    o.host = "h";
    o.pid = 1;
    o.interleave = interleave;
    o.keep_going = keep_going;
    const SweepOutcome outcome = run_sweep(plan, store, o);
    if (out_text) *out_text = out.str();
    return outcome;
  }

  std::string ran() const {
    const std::string s = std::filesystem::exists(counter) ? read_file(counter) : "";
    std::filesystem::remove(counter);
    return s;
  }

  std::map<std::string, std::string> statuses() const {
    ResultsStore store(db);
    std::map<std::string, std::string> out;
    for (const RunRecord& r : store.runs()) out[param_text(r.params, "_id")] = r.status + (r.reason.empty() ? "" : ": " + r.reason);
    return out;
  }
};

TEST(Runner, StoresEveryRepeatAndResumes) {
  Fixture f;
  SweepOutcome o = f.run(f.yaml());
  EXPECT_EQ(o.executed, 6);
  EXPECT_EQ(o.completed, 6);
  EXPECT_EQ(f.ran(), "w1b8\nw1b8\nw1b16\nw1b16\nw1b32\nw1b32\nw2b8\nw2b8\nw2b16\nw2b16\nw2b32\nw2b32\n");
  {
    ResultsStore store(f.db);
    const auto runs = store.runs();
    ASSERT_EQ(runs.size(), 6u);
    EXPECT_EQ(runs[3].repeats.size(), 2u);
    EXPECT_EQ(runs[3].repeats[0].metrics.at("samples_per_sec"), 20);
    EXPECT_EQ(runs[3].repeats[0].metrics.at("step_time_ms"), 1000.0 * 16 / 20);  // global batch 2 x 8
    EXPECT_TRUE(std::filesystem::exists(runs[3].repeats[0].log_path));
  }
  // The same file again: nothing runs. More repeats do not change a run's identity.
  std::string text = f.yaml();
  text.replace(text.find("repeats: 2"), 10, "repeats: 3");
  o = f.run(text);
  EXPECT_EQ(o.executed, 0);
  EXPECT_EQ(o.already_done, 6);
  EXPECT_EQ(f.ran(), "");
  // A new value of a variable runs only the new runs.
  text.replace(text.find("batch: [8, 16, 32]"), 18, "batch: [8, 16, 32, 64]");
  o = f.run(text);
  EXPECT_EQ(o.executed, 2);
  EXPECT_EQ(f.ran(), "w1b64\nw1b64\nw1b64\nw2b64\nw2b64\nw2b64\n");
  o = f.run(text, Rerun::kAll);
  EXPECT_EQ(o.executed, 8);
  f.ran();
}

TEST(Runner, FailuresAreIsolatedAndLargerBatchesSkippedAfterOom) {
  Fixture f;
  const std::string extensions = R"Y(
extensions:
  - when: {workers: 1, batch: 8}
    set: {command: "sh -c 'echo w1b8 >> )Y" + f.counter + R"Y(; echo broken >&2; echo ----- >&2; exit 5'"}
  - when: {workers: 1, batch: 16}
    set: {command: "sh -c 'echo w1b16 >> )Y" + f.counter + R"Y(; exec sleep 30'"}
  - when: {workers: 2, batch: 16}
    set: {command: "sh -c 'echo w2b16 >> )Y" + f.counter + R"Y(; echo RuntimeError: CUDA out of memory; exit 1'"}
)Y";
  std::string out;
  SweepOutcome o = f.run(f.yaml(extensions), Rerun::kNone, &out);
  EXPECT_EQ(o.completed, 2);
  EXPECT_EQ(o.failed, 3);
  EXPECT_EQ(o.skipped, 1);
  // A failing repeat ends its run; the sweep goes on.
  EXPECT_EQ(f.ran(), "w1b8\nw1b16\nw1b32\nw1b32\nw2b8\nw2b8\nw2b16\n");
  const auto s = f.statuses();
  // The reason is the last line that says something (not mpirun's "-----").
  EXPECT_EQ(s.at("w1b8"), "failed: repeat 1: exited with code 5: broken");
  EXPECT_EQ(s.at("w1b16"), "timeout: repeat 1: timed out after 2 s");
  EXPECT_EQ(s.at("w1b32"), "completed");
  EXPECT_EQ(s.at("w2b16"), "oom: repeat 1: exited with code 1: RuntimeError: CUDA out of memory");
  EXPECT_EQ(s.at("w2b32"),
            "skipped: out of memory at batch 16 for m on 2 worker(s); larger batches skipped");
  EXPECT_NE(out.find("[6/6] m weak w2 b32 w2b32: skipped: out of memory at batch 16"), std::string::npos) << out;

  // Resume keeps finished failures; --rerun failed runs them (and only them) again.
  o = f.run(f.yaml(extensions));
  EXPECT_EQ(o.executed, 0);
  EXPECT_EQ(f.ran(), "");
  o = f.run(f.yaml(extensions), Rerun::kFailed);
  EXPECT_EQ(o.executed, 3);  // w1b8, w1b16, w2b16 again; w2b32 stays skipped by the OOM rule
  EXPECT_EQ(f.ran(), "w1b8\nw1b16\nw2b16\n");
}

TEST(Runner, InterleavedRepeatsRunInRounds) {
  Fixture f;
  f.interleave = true;
  // Runs on no cluster are one group: repeat 1 of all six, then repeat 2.
  SweepOutcome o = f.run(f.yaml());
  EXPECT_EQ(o.completed, 6);
  EXPECT_EQ(f.ran(),
            "w1b8\nw1b16\nw1b32\nw2b8\nw2b16\nw2b32\nw1b8\nw1b16\nw1b32\nw2b8\nw2b16\nw2b32\n");
  {
    ResultsStore store(f.db);
    for (const RunRecord& r : store.runs())
      EXPECT_EQ(r.repeats.size(), 2u) << param_text(r.params, "_id");
  }
  // A run's cluster bounds its group: w1 and w2 in turn, each in rounds.
  f.run(f.yaml("extensions:\n  - when: {workers: 2}\n    set: {cluster: other}\n"), Rerun::kAll);
  EXPECT_EQ(f.ran(),
            "w1b8\nw1b16\nw1b32\nw1b8\nw1b16\nw1b32\nw2b8\nw2b16\nw2b32\nw2b8\nw2b16\nw2b32\n");
}

TEST(Runner, InterleavedFailuresLeaveTheRoundsAndOomSkips) {
  Fixture f;
  f.interleave = true;
  const std::string extensions = R"Y(
extensions:
  - when: {workers: 1, batch: 16}
    set: {command: "sh -c 'echo w1b16 >> )Y" +
                                 f.counter + R"Y(; echo broken >&2; exit 5'"}
  - when: {workers: 2, batch: 16}
    set: {command: "sh -c 'echo w2b16 >> )Y" +
                                 f.counter + R"Y(; echo RuntimeError: CUDA out of memory; exit 1'"}
)Y";
  const SweepOutcome o = f.run(f.yaml(extensions));
  EXPECT_EQ(o.completed, 3);
  EXPECT_EQ(o.failed, 2);
  EXPECT_EQ(o.skipped, 1);
  EXPECT_EQ(f.ran(), "w1b8\nw1b16\nw1b32\nw2b8\nw2b16\nw1b8\nw1b32\nw2b8\n");
  const auto s = f.statuses();
  EXPECT_EQ(s.at("w1b16"), "failed: repeat 1: exited with code 5: broken");
  EXPECT_EQ(s.at("w2b32"),
            "skipped: out of memory at batch 16 for m on 2 worker(s); larger batches skipped");
}

TEST(Runner, InterleavedSweepInterruptedBetweenRoundsStoresItsRunsAsInterrupted) {
  Fixture f;
  f.interleave = true;
  // Stop once 3 repeats are stored: polled while a repeat runs, this sees
  // at most 2, so the sweep stops between runs 3 and 4 of round 1.
  f.keep_going = [&f] {
    ResultsStore store(f.db);
    std::size_t stored = 0;
    for (const RunRecord& r : store.runs("t")) stored += r.repeats.size();
    return stored < 3;
  };
  const SweepOutcome o = f.run(f.yaml());
  EXPECT_TRUE(o.interrupted);
  EXPECT_EQ(f.ran(), "w1b8\nw1b16\nw1b32\n");
  const auto s = f.statuses();
  ASSERT_EQ(s.size(), 3u);  // the runs not begun are not in the store
  for (const char* id : {"w1b8", "w1b16", "w1b32"}) {
    EXPECT_EQ(s.at(id), "interrupted: interrupted by the user after 1 of 2 repeats") << id;
  }
  // The next sweep runs them again, and the rest.
  f.keep_going = nullptr;
  EXPECT_EQ(f.run(f.yaml()).completed, 6);
  EXPECT_EQ(f.statuses().at("w1b8"), "completed");
}

TEST(Runner, RunLeftRunningByAKilledSweepRunsAgain) {
  Fixture f;
  const auto plan = plan_sweep(parse_sweep(f.yaml(), "t.yaml"), {});
  const pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ::waitpid(dead, nullptr, 0);
  {
    ResultsStore store(f.db);
    // Run 1 as a sweep killed with SIGKILL leaves it: running, owner gone.
    store.start_run({"t", plan[0].params, "t0", "h", dead, {}});
    // Run 2 claimed by a sweep that is alive on this host (this process).
    store.start_run({"t", plan[1].params, "t0", "h", ::getpid(), {}});
  }
  std::string out;
  const SweepOutcome o = f.run(f.yaml(), Rerun::kNone, &out);
  EXPECT_EQ(o.executed, 5);
  EXPECT_EQ(f.ran().find("w1b16"), std::string::npos);
  EXPECT_NE(out.find(fmt::format("w1b16: running in another sweep (pid {})", ::getpid())), std::string::npos) << out;
  EXPECT_EQ(f.statuses().at("w1b8"), "completed");
}

TEST(Runner, ExternalThroughputPattern) {
  const Params p = {{"kind", Value("external")}, {"global-batch", Value(64)},
                    {"throughput-pattern", Value(R"re("samples_per_sec": ([0-9.]+))re")}};
  const auto m = extract_metrics(p, "", "{\"samples_per_sec\": 12.5}\n{\"samples_per_sec\": 25.0}\n");
  EXPECT_EQ(m.at("samples_per_sec"), 25.0);  // the last match
  EXPECT_EQ(m.at("step_time_ms"), 1000.0 * 64 / 25.0);
  try {
    extract_metrics(p, "", "nothing here\n");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              R"re(no line of the output matches the throughput pattern '"samples_per_sec": ([0-9.]+)')re");
  }
}

// A train record's noise scales reach the store: over training
// (noise_b_simple, noise_adam_b_simple) and at the final weights
// (noise_final_*, noise_final_adam_b_simple); an undefined one (null) is
// left out, not stored as a number.
TEST(Runner, NoiseScalesOfATrainRecord) {
  const Params p = {{"kind", Value("train")}, {"global-batch", Value(32)}};
  const nlohmann::json noise = {{"b_simple", 200.0},
                                {"summary", "text"},
                                {"preconditioned", {{"b_simple", 300.0}}},
                                {"final",
                                 {{"b_simple", 500.0},
                                  {"gradient_sq", 0.04},
                                  {"steps", 400},
                                  {"summary", "text"},
                                  {"preconditioned", {{"b_simple", nullptr}}}}}};
  const nlohmann::json record = {{"results", {{"samples_per_sec", 100.0}, {"noise", noise}}}};
  const auto m = extract_metrics(p, record.dump(), "");
  EXPECT_EQ(m.at("noise_b_simple"), 200.0);
  EXPECT_EQ(m.at("noise_adam_b_simple"), 300.0);
  EXPECT_EQ(m.at("noise_final_b_simple"), 500.0);
  EXPECT_EQ(m.at("noise_final_gradient_sq"), 0.04);
  EXPECT_EQ(m.at("noise_final_steps"), 400.0);
  EXPECT_EQ(m.count("noise_final_adam_b_simple"), 0u);
}

// User patterns run in linear time (RE2): a 50,000-character line with the
// default pattern (which overflowed std::regex's stack) and a catastrophic
// pattern on 50,000 characters both finish; the result is still the last match.
TEST(Runner, ThroughputPatternsAreLinearTime) {
  const Params by_default = {{"kind", Value("external")}, {"global-batch", Value(8)}};
  const std::string long_line = std::string(50000, '7') + " x\n12.5 samples/s\n";
  EXPECT_EQ(extract_metrics(by_default, "", long_line).at("samples_per_sec"), 12.5);
  const std::string digits = "1.5e3 samples/s " + std::string(50000, '9') + "\n";
  EXPECT_GT(extract_metrics(by_default, "", digits).at("samples_per_sec"), 1e3);
  EXPECT_EQ(last_throughput_match("(a+)+$", std::string(50000, 'a') + "b"), "");
  EXPECT_EQ(last_throughput_match("(a*)", "xaay"), "");  // empty matches end; the last is after 'y'
  try {
    check_throughput_pattern("(?<=x)([0-9]+)");  // look-behind: not RE2
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is not a valid regular expression (RE2 syntax)"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(check_throughput_pattern("[0-9]+ samples/s"), Error);  // no group
}

}  // namespace
}  // namespace dlscale::sweep
