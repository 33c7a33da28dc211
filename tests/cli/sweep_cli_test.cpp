// End-to-end: the sweep, results and report commands of the real binary.
#include <gtest/gtest.h>
#include <fmt/format.h>
#include <signal.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <thread>

#include "core/files.h"
#include "process_util.h"

namespace dlscale::testing {
namespace {

struct Dir {
  std::string path = temp_path("sweepcli");
  Dir() { std::filesystem::create_directories(path); }
  ~Dir() { dlscale::remove_tree(path); }
  std::string file(const std::string& name, const std::string& content) const {
    write_file_atomic(path + "/" + name, content);
    return path + "/" + name;
  }
};

std::string echo_sweep(const std::string& name, int runs, const std::string& counter) {
  return fmt::format(R"Y(
name: {}
parameters:
  kind: external
  model: echo
  batch: 4
  command: "sh -c 'echo ${{_i}} >> {}; echo $( 100 + ${{_i}} ) samples/s'"
variables:
  _i: [{}]
)Y",
                     name, counter, [&] {
                       std::string s;
                       for (int i = 1; i <= runs; ++i) s += (i > 1 ? ", " : "") + std::to_string(i);
                       return s;
                     }());
}

/// How many processes match the regular expression `pattern` in their
/// command line (write one character as a class, "[5]", so that the shell
/// running pgrep does not match itself).
int processes_with(const std::string& pattern) {
  const Outcome o = run_shell("(pgrep -c -f -- '" + pattern + "' || true)");
  return std::atoi(o.out.c_str());
}

// A sweep killed with SIGKILL takes its running `dlscale train` (and that
// launcher's workers) with it: a resumed sweep never measures beside an orphan.
TEST(SweepCli, KilledSweepLeavesNoRunBehind) {
  Dir d;
  const std::string marker = "--seed 91827364[5]";
  const std::string file = d.file("long.yaml", R"Y(
name: long
parameters:
  model: lenet
  batch: 8
  steps: 1000000
  warmup: 1
  threads: 1
  workers: 2
  seed: 918273645
  timeout: 600
)Y");
  const std::string pid_file = d.path + "/sweep.pid";
  run_shell(std::string(DLSCALE_BINARY) + " sweep " + file + " --db " + d.path + "/r.db --output-dir " +
            d.path + "/runs >/dev/null 2>&1 & echo $! > " + pid_file);
  const pid_t sweep = std::stoi(read_file(pid_file));
  // The run's launcher and its 2 workers are up.
  for (int i = 0; i < 600 && processes_with(marker) < 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_GE(processes_with(marker), 3);
  ::kill(sweep, SIGKILL);
  int left = -1;
  for (int i = 0; i < 200 && (left = processes_with(marker)) > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(left, 0) << "processes of the killed sweep's run are still alive";
  if (left > 0) run_shell("pkill -9 -f -- '" + marker + "'");
}

TEST(SweepCli, DryRunOfTheQuickstart) {
  const Outcome o = run_dlscale(std::string("sweep --dry-run ") + DLSCALE_SOURCE_DIR + "/examples/quickstart.yaml");
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("8 run(s) planned, 8 to run, 0 skipped"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("resnet18  strong   2        16     32"), std::string::npos) << o.out;
}

// Every study in examples/ (those needing a GPU or a cluster included) plans:
// its options are ones `dlscale train` takes, so a renamed flag breaks here.
TEST(SweepCli, EveryExampleStudyPlans) {
  int studies = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(DLSCALE_SOURCE_DIR) + "/examples")) {
    if (entry.path().extension() != ".yaml") continue;
    ++studies;
    const Outcome o = run_dlscale("sweep --dry-run " + entry.path().string());
    EXPECT_EQ(o.code, 0) << entry.path() << ": " << o.err;
    EXPECT_NE(o.out.find("run(s) planned"), std::string::npos) << entry.path() << ": " << o.out;
  }
  EXPECT_GE(studies, 14);
}

TEST(SweepCli, BadFilesFailWithOneLine) {
  Dir d;
  const std::string bad = d.file("bad.yaml", "parameters: {batch: 8, model: lenet, optimiser: sgd}\n");
  Outcome o = run_dlscale("sweep " + bad + " --db " + d.path + "/r.db");
  EXPECT_EQ(o.code, 2);
  EXPECT_EQ(o.err,
            "dlscale: error: parameter 'optimiser' is not a 'dlscale train' option (see 'dlscale train --help'; names "
            "starting with '_' are free for your own values)\n");
  EXPECT_FALSE(std::filesystem::exists(d.path + "/r.db"));  // nothing written for a plan that cannot run
  o = run_dlscale("sweep " + d.path + "/missing.yaml");
  EXPECT_EQ(o.code, 2);
  EXPECT_EQ(o.err, "dlscale: error: sweep file '" + d.path + "/missing.yaml' does not exist\n");
  o = run_dlscale("report --db " + d.path + "/none.db");
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("results store '" + d.path + "/none.db' does not exist"), std::string::npos);
}

// A value the command refuses fails the plan before any run starts, naming
// the run by what varies, as the command itself would name the value.
TEST(SweepCli, AValueTheCommandRefusesFailsThePlan) {
  Dir d;
  const auto sweep = [&](const std::string& variables) {
    return d.file(
        "v.yaml",
        "name: v\nparameters: {model: lenet, batch: 8, steps: 2}\nvariables:\n" + variables);
  };
  Outcome o = run_dlscale("sweep " + sweep("  strategy: [allreduce, ring]\n  workers: [1, 2]\n") +
                          " --db " + d.path + "/r.db");
  EXPECT_EQ(o.code, 2);
  EXPECT_EQ(o.err,
            "dlscale: error: run 3 of the plan (global-batch=8 strategy=ring workers=1): unknown "
            "--strategy "
            "'ring'; allowed: "
            "allreduce, tree, hierarchical, independent, ps, zero\n");
  EXPECT_FALSE(std::filesystem::exists(d.path + "/r.db"));  // nothing written
  o = run_dlscale("sweep " + sweep("  compress: [none, fp8]\n") + " --dry-run");
  EXPECT_EQ(o.code, 2);
  EXPECT_EQ(
      o.err,
      "dlscale: error: run 2 of the plan (compress=fp8): unknown --compress 'fp8'; allowed: none, "
      "fp16, bf16\n");
  o = run_dlscale("sweep " + sweep("  lr: [0.1, fast]\n") + " --dry-run");
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("run 2 of the plan (lr=fast): "), std::string::npos) << o.err;
  o = run_dlscale("sweep " + sweep("  warmup: [1, bogus]\n") + " --dry-run");
  EXPECT_EQ(o.code, 2);
  EXPECT_EQ(o.err,
            "dlscale: error: run 2 of the plan (warmup=bogus): --warmup: 'bogus' is not an "
            "integer\n");
}

TEST(SweepCli, TwoSweepsWriteOneStoreAtOnce) {
  Dir d;
  const std::string a = d.file("a.yaml", echo_sweep("a", 25, d.path + "/a.txt"));
  const std::string b = d.file("b.yaml", echo_sweep("b", 25, d.path + "/b.txt"));
  const std::string args = " --db " + d.path + "/r.db --output-dir " + d.path + "/runs";
  Outcome oa, ob;
  std::thread ta([&] { oa = run_dlscale("sweep " + a + args); });
  std::thread tb([&] { ob = run_dlscale("sweep " + b + args); });
  ta.join();
  tb.join();
  ASSERT_EQ(oa.code, 0) << oa.err << oa.out;
  ASSERT_EQ(ob.code, 0) << ob.err << ob.out;
  const Outcome e = run_dlscale("results export --format json --db " + d.path + "/r.db");
  ASSERT_EQ(e.code, 0) << e.err;
  const auto j = nlohmann::json::parse(e.out);
  ASSERT_EQ(j["runs"].size(), 50u);
  std::map<std::string, int> per_sweep;
  for (const auto& r : j["runs"]) {
    EXPECT_EQ(r["status"], "completed");
    ASSERT_EQ(r["repeats"].size(), 1u);
    EXPECT_EQ(r["repeats"][0]["metrics"]["samples_per_sec"].get<double>(), 100 + r["params"]["_i"].get<int>());
    ++per_sweep[r["sweep"]];
  }
  EXPECT_EQ(per_sweep["a"], 25);
  EXPECT_EQ(per_sweep["b"], 25);
}

TEST(SweepCli, TwoSweepsOfTheSameFileShareTheWork) {
  Dir d;
  const std::string counter = d.path + "/ran.txt";
  std::string yaml = echo_sweep("same", 30, counter);
  yaml.replace(yaml.find("sh -c '"), 7, "sh -c 'sleep 0.1; ");  // long enough for the two to overlap
  const std::string file = d.file("same.yaml", yaml);
  const std::string cmd = "sweep " + file + " --db " + d.path + "/r.db --output-dir " + d.path + "/runs";
  Outcome oa, ob;
  std::thread ta([&] { oa = run_dlscale(cmd); });
  std::thread tb([&] { ob = run_dlscale(cmd); });
  ta.join();
  tb.join();
  ASSERT_EQ(oa.code, 0) << oa.err;
  ASSERT_EQ(ob.code, 0) << ob.err;
  // Every run ran exactly once, by one sweep or the other.
  std::map<std::string, int> times;
  std::istringstream in(read_file(counter));
  for (std::string line; std::getline(in, line);) ++times[line];
  ASSERT_EQ(times.size(), 30u);
  for (const auto& [run, n] : times) EXPECT_EQ(n, 1) << "run " << run;
  // Both did some of it.
  EXPECT_NE(oa.out.find(": completed, "), std::string::npos) << oa.out;
  EXPECT_NE(ob.out.find(": completed, "), std::string::npos) << ob.out;
}

TEST(SweepCli, InterruptedSweepKeepsFinishedRunsAndResumes) {
  Dir d;
  const std::string counter = d.path + "/ran.txt";
  std::string yaml = echo_sweep("s", 3, counter) + R"Y(
extensions:
  - when: {_i: 2}
    set: {command: "sh -c 'echo slow >> )Y" + counter + R"Y(; exec sleep 60'"}
)Y";
  const std::string file = d.file("s.yaml", yaml);
  const std::string args = " --db " + d.path + "/r.db --output-dir " + d.path + "/runs --progress plain";
  Outcome o;
  std::thread t([&] { o = run_shell("exec " + std::string(DLSCALE_BINARY) + " sweep " + file + args +
                                    " & echo $! > " + d.path + "/pid; wait"); });
  for (int i = 0; i < 400; ++i) {  // until the slow run has started
    if (std::filesystem::exists(counter) && read_file(counter).find("slow") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_NE(read_file(counter).find("slow"), std::string::npos);
  const int pid = std::stoi(read_file(d.path + "/pid"));
  ::kill(pid, SIGTERM);
  t.join();
  EXPECT_NE(o.out.find("[2/3] echo weak w1 b4 2: interrupted"), std::string::npos) << o.out;
  Outcome list = run_dlscale("results list --db " + d.path + "/r.db");
  EXPECT_NE(list.out.find("completed"), std::string::npos);
  EXPECT_NE(list.out.find("interrupted"), std::string::npos) << list.out;
  EXPECT_EQ(read_file(counter), "1\nslow\n");

  // Resume with the slow run fixed: run 1 is kept, 2 and 3 run.
  std::filesystem::remove(counter);
  d.file("s.yaml", echo_sweep("s", 3, counter));
  o = run_dlscale("sweep " + file + args);
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(read_file(counter), "2\n3\n");
  EXPECT_NE(o.out.find("[1/3] echo weak w1 b4 1: already completed"), std::string::npos) << o.out;
}

TEST(SweepCli, LiveProgressLine) {
  Dir d;
  const std::string file = d.file("p.yaml", R"Y(
name: p
parameters: {kind: external, batch: 1, command: "sh -c 'sleep 1.2; echo 5 samples/s'"}
variables: {_i: [1, 2]}
)Y");
  const Outcome o = run_dlscale("sweep " + file + " --progress live --db " + d.path + "/r.db --output-dir " + d.path);
  ASSERT_EQ(o.code, 0) << o.err;
  // The line is rewritten in place while a run goes: run i/n, configuration, time in the run, elapsed, ETA.
  EXPECT_TRUE(std::regex_search(
      o.out, std::regex(R"re(\r\x1b\[K\[1/2\] external weak w1 b1 1 repeat 1/1 \| \d+s \| elapsed \d+s \| ETA \?)re")))
      << o.out;
  // Once a repeat has finished, the ETA is the average repeat times the repeats left.
  EXPECT_TRUE(std::regex_search(
      o.out, std::regex(R"re(\r\x1b\[K\[2/2\] external weak w1 b1 2 repeat 1/1 \| \d+s \| elapsed \d+s \| ETA \d+s)re")))
      << o.out;
  EXPECT_NE(o.out.find("[2/2] external weak w1 b1 2: completed, 5.0 samples/s (median of 1)\n"), std::string::npos);
}

TEST(SweepCli, RealTrainingSweepReportsAndHtml) {
  Dir d;
  const std::string file = d.file("tiny.yaml", R"Y(
name: tiny
parameters: {model: lenet, batch: 16, steps: 4, warmup: 1, threads: 1, display-every: 0}
variables: {workers: [1, 2]}
)Y");
  const std::string db = " --db " + d.path + "/r.db";
  const Outcome o = run_dlscale("sweep " + file + db + " --output-dir " + d.path + "/runs --html " + d.path +
                                "/r.html");
  ASSERT_EQ(o.code, 0) << o.err << o.out;
  Outcome r = run_dlscale("report --type weak --format csv" + db);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.substr(0, r.out.find('\n')),
            "model,batch/worker,workers,global_batch,step_time_ms,step_time_min_ms,step_time_max_ms,samples_per_sec,"
            "samples_per_sec_min,samples_per_sec_max,speedup,efficiency_pct,repeats,status");
  EXPECT_NE(r.out.find("\nlenet,16,2,32,"), std::string::npos) << r.out;
  Outcome show = run_dlscale("results show 2" + db);
  ASSERT_EQ(show.code, 0) << show.err;
  EXPECT_NE(show.out.find("run 2 of sweep 'tiny': completed"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("\"torch_version\":"), std::string::npos) << show.out;  // the program's own versions
  EXPECT_NE(show.out.find("breakdown_backward_ms: "), std::string::npos) << show.out;
  r = run_dlscale("report --type breakdown --format json" + db);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["rows"].size(), 2u);
  EXPECT_GT(j["rows"][1]["forward_ms"].get<double>(), 0);
  EXPECT_GT(j["rows"][1]["backward_ms"].get<double>(), 0);
  const std::string html = read_file(d.path + "/r.html");
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("Throughput vs workers"), std::string::npos);
  EXPECT_NE(html.find("Step-time breakdown"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("http://www.w3.org/2000/svg\" width"), html.find("http://"));  // no link but the SVG namespace
}

// A commbench sweep on 1 and 2 workers: stored per size, reported by
// message size, drawn in the HTML next to nothing else.
TEST(SweepCli, CommbenchSweepReportsBusbwBySize) {
  Dir d;
  const std::string file = d.file("cb.yaml", R"Y(
name: cb
parameters: {kind: commbench, op: "allreduce,tree", max-bytes: 64K, factor: 16, iters: 2, warmup: 1, repeats: 2}
variables: {workers: [2, 3]}
)Y");
  const std::string db = " --db " + d.path + "/r.db";
  const Outcome o = run_dlscale("sweep " + file + db + " --output-dir " + d.path + "/runs --html " + d.path +
                                "/r.html");
  ASSERT_EQ(o.code, 0) << o.err << o.out;
  EXPECT_NE(o.out.find("GB/s peak busbw (median of 2)"), std::string::npos) << o.out;
  Outcome r = run_dlscale("report --type commbench --format csv" + db);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.substr(0, r.out.find('\n')), "series,op,bytes,busbw_gbps");
  for (const char* row : {"\nallreduce workers=2,allreduce,4,", "\ntree workers=3,tree,65536,"}) {
    EXPECT_NE(r.out.find(row), std::string::npos) << row << "\n" << r.out;
  }
  r = run_dlscale("report --type weak" + db);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("only commbench runs; use --type commbench"), std::string::npos) << r.err;
  const std::string html = read_file(d.path + "/r.html");
  EXPECT_NE(html.find("tree: bus bandwidth vs message size"), std::string::npos);
  EXPECT_EQ(html.find("Throughput vs workers"), std::string::npos);
}

}  // namespace
}  // namespace dlscale::testing
