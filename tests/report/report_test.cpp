// Golden tests: every report type in every format, and the HTML page, from a
// fixed set of runs. Regenerate after an intended change with
//   DLSCALE_UPDATE_GOLDEN=1 build/tests/dlscale_tests --gtest_filter='Report*'
// and review the diff of tests/report/golden/.
#include "report/report.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <tuple>

#include "core/error.h"
#include "core/files.h"
#include "report/html.h"
#include "report/results_view.h"
#include "report/tta_report.h"
#include "sweep/record_metrics.h"

namespace dlscale::report {
namespace {

using sweep::Params;
using sweep::RunRecord;
using sweep::Value;

/// A completed run whose repeats ran at `rates` samples/s, with a breakdown
/// that scales with the step time.
RunRecord run(std::int64_t id, const std::string& model, const std::string& scaling, int workers, int batch,
              std::vector<double> rates, const std::string& tool = "dlscale", const std::string& status = "completed") {
  RunRecord r;
  r.id = id;
  r.sweep = "golden";
  const int global = scaling == "weak" ? batch * workers : batch;
  r.params = {{"model", Value(model)},       {"scaling", Value(scaling)},     {"workers", Value(workers)},
              {"batch", Value(global / workers)}, {"global-batch", Value(global)}, {"repeats", Value(3)},
              {"_tool", Value(tool)},        {"kind", Value(tool == "dlscale" ? "dlscale" : "external")}};
  r.status = status;
  r.reason = status == "oom" ? "repeat 1: exited with code 3: out of memory" : "";
  r.started_at = "2026-11-22T10:00:00.000Z";
  r.host = "node1";
  int i = 0;
  for (double sps : rates) {
    sweep::RepeatRecord rep;
    rep.repeat = ++i;
    rep.status = "completed";
    const double step = 1000.0 * global / sps;
    rep.metrics = {{"samples_per_sec", sps}, {"step_time_ms", step}};
    if (tool == "dlscale") {
      rep.metrics["breakdown_data_ms"] = 0.05 * step;
      rep.metrics["breakdown_forward_ms"] = 0.3 * step;
      rep.metrics["breakdown_backward_ms"] = 0.45 * step;
      rep.metrics["breakdown_comm_ms"] = workers > 1 ? 0.15 * step : 0;
      rep.metrics["breakdown_optimizer_ms"] = 0.05 * step;
      rep.metrics["breakdown_total_ms"] = step * (workers > 1 ? 1.0 : 0.85);
    }
    r.repeats.push_back(rep);
  }
  if (status == "oom") {
    sweep::RepeatRecord rep;
    rep.repeat = 1;
    rep.status = "oom";
    rep.reason = "exited with code 3: out of memory";
    r.repeats = {rep};
  }
  return r;
}

std::vector<RunRecord> golden_runs() {
  return {
      run(1, "lenet", "weak", 1, 64, {1000, 1040, 980}),
      run(2, "lenet", "weak", 2, 64, {1700, 1800, 1750}),
      run(3, "lenet", "weak", 4, 64, {3000, 3100, 2900}),
      run(4, "resnet18", "weak", 1, 32, {200, 210, 205}),
      run(5, "resnet18", "weak", 2, 32, {350, 340, 360}),
      run(6, "resnet18", "weak", 4, 32, {}, "dlscale", "oom"),
      run(7, "lenet", "strong", 1, 64, {1000, 1010, 990}),
      run(8, "lenet", "strong", 2, 64, {1500, 1520, 1480}),
      run(9, "lenet", "strong", 4, 64, {2100, 2000, 2200}),
      run(10, "lenet", "weak", 1, 64, {900, 905, 910}, "ddp"),
      run(11, "lenet", "weak", 2, 64, {1500, 1490, 1510}, "ddp"),
  };
}

std::vector<RunRecord> dlscale_only() {
  auto runs = golden_runs();
  runs.resize(9);
  return runs;
}

void expect_golden(const std::string& name, const std::string& actual) {
  const std::string path = std::string(DLSCALE_SOURCE_DIR) + "/tests/report/golden/" + name;
  if (std::getenv("DLSCALE_UPDATE_GOLDEN") != nullptr) {
    write_file_atomic(path, actual);
    return;
  }
  ASSERT_TRUE(std::filesystem::exists(path)) << "missing golden file " << path;
  EXPECT_EQ(read_file(path), actual) << "golden " << name << " differs";
}

TEST(ReportGolden, WeakInEveryFormat) {
  const Report r = build_report(dlscale_only(), {"weak", "", ""});
  expect_golden("weak.txt", render(r, Format::kText));
  expect_golden("weak.md", render(r, Format::kMarkdown));
  expect_golden("weak.csv", render(r, Format::kCsv));
  expect_golden("weak.json", render(r, Format::kJson));
}

TEST(ReportGolden, StrongInEveryFormat) {
  const Report r = build_report(dlscale_only(), {"strong", "", ""});
  expect_golden("strong.txt", render(r, Format::kText));
  expect_golden("strong.md", render(r, Format::kMarkdown));
  expect_golden("strong.csv", render(r, Format::kCsv));
  expect_golden("strong.json", render(r, Format::kJson));
}

TEST(ReportGolden, BreakdownInEveryFormat) {
  const Report r = build_report(dlscale_only(), {"breakdown", "", ""});
  expect_golden("breakdown.txt", render(r, Format::kText));
  expect_golden("breakdown.md", render(r, Format::kMarkdown));
  expect_golden("breakdown.csv", render(r, Format::kCsv));
  expect_golden("breakdown.json", render(r, Format::kJson));
}

// Runs that exchanged gradients get a second breakdown table: gradient bytes
// per sample of a worker's batch beside training FLOPs per sample. (The
// golden runs record neither, so their breakdown has one table.)
TEST(Report, BreakdownPutsBytesBesideFlopsPerSample) {
  std::vector<RunRecord> runs = dlscale_only();
  EXPECT_EQ(build_report(runs, {"breakdown", "", ""}).tables.size(), 1u);
  for (RunRecord& r : runs) {
    for (auto& rep : r.repeats) {
      rep.metrics["comm_bytes_per_step"] = 4e6;  // 4 MB a step
      // 2 GFLOP per sample, whatever the rate.
      rep.metrics["est_train_gflops_per_sec"] = 2.0 * rep.metrics["samples_per_sec"];
    }
  }
  const Report r = build_report(runs, {"breakdown", "", ""});
  ASSERT_EQ(r.tables.size(), 2u);
  const Table& t = r.tables[1];
  ASSERT_FALSE(t.rows.empty());
  const int64_t batch = sweep::param_int(runs.front().params, "batch");
  const auto& row = t.rows.front();
  EXPECT_NEAR(*row[row.size() - 3].value, 4e6 / static_cast<double>(batch) / 1e3, 1e-9);  // KB/sample
  EXPECT_NEAR(*row[row.size() - 2].value, 2.0, 1e-9);                                   // GFLOP/sample
  EXPECT_NEAR(*row.back().value, 4e6 / static_cast<double>(batch) / 2000.0, 1e-6);       // bytes/MFLOP
}

TEST(ReportGolden, CompareInEveryFormat) {
  const auto runs = filter_runs(golden_runs(), "${scaling} == 'weak' and ${model} == 'lenet'");
  EXPECT_EQ(detect_compare_by(runs), "_tool");
  const Report r = build_report(runs, {"compare", "", "ddp"});
  expect_golden("compare.txt", render(r, Format::kText));
  expect_golden("compare.md", render(r, Format::kMarkdown));
  expect_golden("compare.csv", render(r, Format::kCsv));
  expect_golden("compare.json", render(r, Format::kJson));
}

TEST(Report, ANameSetOnSomeRunsOnlyIsNothingToCompare) {
  // `_name` on two runs differs from its absence on the others, but a
  // comparison takes only the runs that set it: one value, nothing to
  // compare. The HTML page leaves its comparison out instead of failing.
  auto runs = dlscale_only();
  runs[0].params["_name"] = Value("tuned");
  runs[1].params["_name"] = Value("tuned");
  EXPECT_EQ(detect_compare_by(runs), "");
  HtmlOptions o;
  o.source = "golden.db";
  const std::string html = render_html(runs, o);
  EXPECT_EQ(html.find("id=\"compare\""), std::string::npos);
  EXPECT_NE(html.find("id=\"weak\""), std::string::npos);
  runs[2].params["_name"] = Value("plain");
  EXPECT_EQ(detect_compare_by(runs), "_name");
  EXPECT_NE(render_html(runs, o).find("id=\"compare\""), std::string::npos);
}

TEST(ReportGolden, HtmlPage) {
  HtmlOptions o;
  o.source = "golden.db";
  o.baseline = "ddp";
  const std::string html = render_html(golden_runs(), o);
  expect_golden("report.html", html);
  // Self-contained: no scripts, and no URL but the SVG namespace.
  EXPECT_EQ(html.find("<script"), std::string::npos);
  std::size_t urls = 0, namespaces = 0;
  for (std::size_t at = html.find("http"); at != std::string::npos; at = html.find("http", at + 1)) ++urls;
  for (std::size_t at = html.find("xmlns=\"http://www.w3.org/2000/svg\""); at != std::string::npos;
       at = html.find("xmlns=\"http://www.w3.org/2000/svg\"", at + 1)) {
    ++namespaces;
  }
  EXPECT_EQ(urls, namespaces);
  EXPECT_EQ(namespaces, 5u);  // weak: 2 charts, strong: 2 charts, breakdown: 1
}

/// A completed commbench run: allreduce and tree busbw at 1 KiB and 1 MiB
/// (the second repeat 10% faster), on `workers` ranks.
RunRecord commbench_run(std::int64_t id, int workers) {
  RunRecord r;
  r.id = id;
  r.sweep = "golden-commbench";
  r.params = {{"kind", Value("commbench")}, {"workers", Value(workers)}, {"scaling", Value("weak")},
              {"repeats", Value(2)},       {"op", Value("allreduce,tree")}};
  r.status = "completed";
  r.started_at = "2026-11-22T10:00:00.000Z";
  r.host = "node1";
  for (int rep = 1; rep <= 2; ++rep) {
    sweep::RepeatRecord rr;
    rr.repeat = rep;
    rr.status = "completed";
    const double f = (rep == 2 ? 1.1 : 1.0) * workers;
    rr.metrics = {{"busbw_gbps/allreduce/1024", 0.01 * f}, {"busbw_gbps/allreduce/1048576", 1.5 * f},
                  {"busbw_gbps/tree/1024", 0.008 * f},     {"busbw_gbps/tree/1048576", 1.0 * f},
                  {"alpha_us/allreduce", 40.0 / f},        {"bandwidth_gbps/allreduce", 2.0 * f},
                  {"alpha_us/tree", 55.0 / f},             {"bandwidth_gbps/tree", 1.2 * f},
                  {"busbw_gbps_peak", 1.5 * f},            {"wrong", 0}};
    r.repeats.push_back(rr);
  }
  return r;
}

TEST(ReportGolden, CommbenchInEveryFormatAndHtml) {
  const std::vector<RunRecord> runs = {commbench_run(21, 2), commbench_run(22, 4)};
  const Report r = build_report(runs, {"commbench", "", ""});
  expect_golden("commbench.txt", render(r, Format::kText));
  expect_golden("commbench.md", render(r, Format::kMarkdown));
  expect_golden("commbench.csv", render(r, Format::kCsv));
  expect_golden("commbench.json", render(r, Format::kJson));
  // Mixed with training runs: the scaling sections ignore the commbench runs,
  // which get one busbw chart per operation.
  std::vector<RunRecord> mixed = dlscale_only();
  mixed.insert(mixed.end(), runs.begin(), runs.end());
  HtmlOptions o;
  o.source = "golden.db";
  const std::string html = render_html(mixed, o);
  expect_golden("commbench.html", html);
  EXPECT_NE(html.find("allreduce: bus bandwidth vs message size"), std::string::npos);
  EXPECT_NE(html.find(">1M</text>"), std::string::npos);
  EXPECT_EQ(build_report(mixed, {"weak", "", ""}).data.rows.size(),
            build_report(dlscale_only(), {"weak", "", ""}).data.rows.size());
  try {
    build_report(runs, {"weak", "", ""});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "the selection holds only commbench runs; use --type commbench");
  }
  EXPECT_THROW(build_report(dlscale_only(), {"commbench", "", ""}), Error);
}

/// Runs of a parameter-server comparison: allreduce next to PS with 1 and
/// 2 shards, the PS runs carrying the ps_* metrics a record gives.
std::vector<RunRecord> ps_runs() {
  std::vector<RunRecord> runs;
  const std::vector<std::tuple<std::string, double, int, double>> setups = {
      {"allreduce", 300, 0, 0}, {"ps-k1", 210, 1, 187e6}, {"ps-k2-async", 240, 2, 93.5e6}};
  std::int64_t id = 30;
  for (const auto& [setup, sps, shards, bytes_in] : setups) {
    RunRecord r = run(++id, "resnet18", "weak", 4, 16, {sps, sps * 1.02, sps * 0.98});
    r.params.erase("_tool");
    r.params["_setup"] = Value(setup);
    for (auto& rep : r.repeats) {
      if (shards == 0) continue;
      rep.metrics["ps_shards"] = shards;
      rep.metrics["ps_shard_bytes_in_per_step_max"] = bytes_in;
      rep.metrics["ps_shard_busy_ms_per_step_max"] = 55.0 / shards;
      rep.metrics["ps_imbalance"] = 1.0;
      rep.metrics["ps_staleness_mean"] = setup == "ps-k2-async" ? 2.8 : 0.0;
      rep.metrics["ps_staleness_max"] = setup == "ps-k2-async" ? 5.0 : 0.0;
    }
    runs.push_back(std::move(r));
  }
  return runs;
}

TEST(ReportGolden, CompareWithParameterServerTable) {
  const Report r = build_report(ps_runs(), {"compare", "_setup", "allreduce"});
  ASSERT_EQ(r.tables.size(), 2u);  // throughput, then the PS table (PS runs only)
  EXPECT_EQ(r.tables[1].rows.size(), 2u);
  expect_golden("compare_ps.txt", render(r, Format::kText));
  expect_golden("compare_ps.md", render(r, Format::kMarkdown));
  // Without PS runs there is no PS table.
  EXPECT_EQ(build_report(golden_runs(), {"compare", "", ""}).tables.size(), 1u);
}

/// Runs of an I/O-overhead study: lenet on 1 and 2 workers, each on
/// synthetic data and on two real sources (one run of them failed).
std::vector<RunRecord> io_runs() {
  std::vector<RunRecord> runs;
  const std::vector<std::tuple<std::string, int, double, double>> cases = {
      {"synthetic", 1, 1000, 0.1}, {"fashion-mnist", 1, 950, 0.6}, {"wds:/data/fm", 1, 800, 3.5},
      {"synthetic", 2, 1800, 0.1}, {"fashion-mnist", 2, 1530, 0.9}, {"wds:/data/fm", 2, 0, 0}};
  std::int64_t id = 40;
  for (const auto& [data, workers, sps, pipeline] : cases) {
    RunRecord r = sps > 0 ? run(++id, "lenet", "weak", workers, 64, {sps, sps * 1.01, sps * 0.99})
                          : run(++id, "lenet", "weak", workers, 64, {}, "dlscale", "oom");
    r.params.erase("_tool");
    r.params["data"] = Value(data);
    for (auto& rep : r.repeats) rep.metrics["data_pipeline_ms_per_batch"] = pipeline;
    runs.push_back(std::move(r));
  }
  return runs;
}

TEST(ReportGolden, IoOverheadInEveryFormat) {
  const Report r = build_report(io_runs(), {"io", "", ""});
  ASSERT_EQ(r.tables.size(), 1u);
  ASSERT_EQ(r.tables[0].rows.size(), 2u);
  // 1 worker, fashion-mnist: 1 - 950 / 1000 = 5%.
  EXPECT_NEAR(*r.tables[0].rows[0][6].value, 5.0, 1e-9);  // after 4 labels, synthetic, samples/s
  expect_golden("io.txt", render(r, Format::kText));
  expect_golden("io.md", render(r, Format::kMarkdown));
  expect_golden("io.csv", render(r, Format::kCsv));
  expect_golden("io.json", render(r, Format::kJson));
  // Without a synthetic baseline there is no overhead to compute.
  try {
    build_report(golden_runs(), {"io", "", ""});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "--type io needs runs that differ in the parameter 'data', one of them synthetic "
                           "(values in the selection: none)");
  }
}

/// Runs of a sharding study: resnet18 with Adam, allreduce and zero stages
/// 1 and 2 on 1, 2 and 4 workers, with the mem_* metrics a record gives
/// (Ψ = 11.2 M float32 parameters, padded; K = 8 bytes for Adam).
std::vector<RunRecord> memory_runs() {
  std::vector<RunRecord> runs;
  const double psi = 4.0 * 11'200'000;
  std::int64_t id = 60;
  for (const std::string strategy : {"allreduce", "zero"}) {
    for (const int stage : {1, 2}) {
      if (strategy == "allreduce" && stage == 2) continue;
      for (const int workers : {1, 2, 4}) {
        RunRecord r = run(++id, "resnet18", "weak", workers, 16, {100.0 * workers, 101.0 * workers});
        r.params.erase("_tool");
        r.params["strategy"] = Value(strategy);
        if (strategy == "zero") r.params["zero-stage"] = Value(stage);
        const double n = strategy == "zero" ? workers : 1;
        const double grads = strategy == "zero" && stage == 2 ? psi / n : psi;
        for (auto& rep : r.repeats) {
          rep.metrics["mem_params_bytes"] = psi;
          rep.metrics["mem_grads_bytes"] = grads;
          rep.metrics["mem_optimizer_bytes"] = 2 * psi / n;
          rep.metrics["mem_total_bytes"] = psi + grads + 2 * psi / n;
          rep.metrics["mem_peak_rss_bytes"] = 400.0 * 1024 * 1024 + psi + grads + 2 * psi / n;
        }
        runs.push_back(std::move(r));
      }
    }
  }
  return runs;
}

TEST(ReportGolden, MemoryInEveryFormatAndHtml) {
  const Report r = build_report(memory_runs(), {"memory", "", ""});
  ASSERT_EQ(r.tables.size(), 1u);
  ASSERT_EQ(r.tables[0].rows.size(), 9u);
  // zero stage 2 on 4 workers: 4Ψ + 4Ψ/4 + 8Ψ/4 = 7Ψ bytes = 7 x 42.7 MiB.
  const auto& row = r.tables[0].rows[8];
  EXPECT_EQ(row[0].text, "resnet18");
  EXPECT_EQ(row[1].text, "zero");
  EXPECT_EQ(row[3].text, "4");
  EXPECT_NEAR(*row[7].value, 7 * 4.0 * 11'200'000 / 4 / (1024.0 * 1024), 1e-9);
  expect_golden("memory.txt", render(r, Format::kText));
  expect_golden("memory.md", render(r, Format::kMarkdown));
  expect_golden("memory.csv", render(r, Format::kCsv));
  expect_golden("memory.json", render(r, Format::kJson));
  const std::string html = render_html(memory_runs(), {});
  EXPECT_NE(html.find("Peak resident set per worker"), std::string::npos);
  EXPECT_NE(html.find("resnet18 zero zero-stage=2"), std::string::npos);
  // Runs without memory figures have no memory report.
  try {
    build_report(golden_runs(), {"memory", "", ""});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no run in the selection has memory figures"), std::string::npos);
  }
}

// Runs on a GPU carry the CUDA allocator's peak: the report gains its column
// (CPU reports, above, do not have it) and the chart plots it.
TEST(Report, MemoryOnAGpuShowsTheAllocatorsPeak) {
  std::vector<RunRecord> runs = memory_runs();
  for (RunRecord& r : runs) {
    for (auto& rep : r.repeats) rep.metrics["mem_device_peak_bytes"] = 3.0 * rep.metrics["mem_total_bytes"];
  }
  const Report r = build_report(runs, {"memory", "", ""});
  const Table& t = r.tables.at(0);
  ASSERT_EQ(t.headers.back(), "GPU peak MiB");
  // zero stage 2 on 4 workers: 3 x 7Ψ bytes.
  EXPECT_NEAR(*t.rows.at(8).back().value, 3 * 7 * 4.0 * 11'200'000 / 4 / (1024.0 * 1024), 1e-9);
  const std::string html = render_html(runs, {});
  EXPECT_NE(html.find("Peak GPU memory allocated per worker"), std::string::npos);
  EXPECT_EQ(html.find("Peak resident set per worker"), std::string::npos);
}

// report --type noise: each run's noise scale beside its global batch, an
// undefined estimate left empty, and a chart of B_simple against the batch.
TEST(Report, NoiseScaleBesideTheGlobalBatch) {
  std::vector<RunRecord> runs;
  std::int64_t id = 80;
  for (const int workers : {2, 4}) {
    RunRecord r = run(++id, "resnet18", "weak", workers, 16, {100.0 * workers, 101.0 * workers});
    for (auto& rep : r.repeats) {
      rep.metrics["noise_b_small"] = 16;
      rep.metrics["noise_b_big"] = 16.0 * workers;
      rep.metrics["noise_gradient_sq"] = workers == 2 ? 0.5 : -0.25;  // 4 workers: undefined
      rep.metrics["noise_trace_sigma"] = 300;
      rep.metrics["noise_steps"] = 4;
      if (workers == 2) rep.metrics["noise_b_simple"] = 600;
      // Its course: undefined at first (null), negative, then positive.
      rep.record =
          R"({"results": {"noise": {"course": {"step": [0, 1, 2, 3], "b_simple": [null, -40, 500, 600]}}}})";
    }
    runs.push_back(std::move(r));
  }
  runs.push_back(run(++id, "resnet18", "weak", 1, 16, {90.0}));  // measured nothing: no row
  const Report r = build_report(runs, {"noise", "", ""});
  const Table& t = r.tables.at(0);
  ASSERT_EQ(t.rows.size(), 2u);
  const size_t b_simple = t.headers.size() - 2;
  EXPECT_EQ(t.headers.at(b_simple), "B_simple");
  EXPECT_EQ(t.headers.back(), "B_adam");  // empty: these runs did not use Adam
  EXPECT_EQ(t.rows[0].back().text, "");
  EXPECT_EQ(t.rows[0][3].text, "32");  // global batch
  EXPECT_EQ(t.headers.at(4), "steps measured");
  EXPECT_EQ(t.rows[0][4].text, "4");
  EXPECT_EQ(*t.rows[0][b_simple].value, 600);
  EXPECT_EQ(t.rows[1][b_simple].text, "");
  EXPECT_EQ(*t.rows[1][b_simple - 2].value, -0.25);  // |G|^2 as measured, not clamped
  const std::string html = render_html(runs, {});
  EXPECT_NE(html.find("Gradient noise scale vs global batch"), std::string::npos);
  // The chart against the batch plots B_simple (600), not tr(Sigma) (300).
  EXPECT_EQ(html.find(", 300.0</title>"), std::string::npos);
  EXPECT_NE(html.find("Gradient noise scale during training"), std::string::npos);
  EXPECT_NE(html.find("step 3, 600.0"), std::string::npos);  // a point's tooltip
  EXPECT_EQ(html.find("step 1, -40"),
            std::string::npos);  // negative: in the record, off the log axis
  try {
    build_report(golden_runs(), {"noise", "", ""});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(
        std::string(e.what()).find("no run in the selection measured the gradient noise scale"),
        std::string::npos);
  }
}

/// A repeat of a run to 90% top-1 that evaluated after every epoch: it
/// reached the target at its last epoch after `seconds`, or (aborted) ran
/// `epochs` epochs in `seconds` without reaching it.
sweep::RepeatRecord tta_repeat(int repeat, double seconds, int epochs, bool aborted) {
  sweep::RepeatRecord rep;
  rep.repeat = repeat;
  rep.status = "completed";
  const double final_top1 = aborted ? 0.86 : 0.905;
  nlohmann::json evals = nlohmann::json::array();
  for (int e = 1; e <= epochs; ++e) {
    evals.push_back({{"step", 100 * e}, {"epoch", 1.0 * e}, {"top1", final_top1 - 0.04 * (epochs - e)},
                     {"top5", 0.99}, {"samples", 10000}, {"seconds", 0.5}, {"run_seconds", seconds * e / epochs}});
  }
  rep.record = nlohmann::json({{"results",
                                {{"convergence",
                                  {{"target", 0.9}, {"status", aborted ? "aborted" : "success"}, {"evals", evals}}}}}})
                   .dump();
  rep.metrics = {{"samples_per_sec", 1000},        {"step_time_ms", 128},           {"conv_target", 0.9},
                 {"conv_run_s", seconds},          {"conv_success", aborted ? 0 : 1}, {"conv_final_top1", final_top1},
                 {"conv_epochs_done", 1.0 * epochs}};
  if (!aborted) {
    rep.metrics["conv_time_to_accuracy_s"] = seconds;
    rep.metrics["conv_epochs_to_target"] = epochs;
  }
  return rep;
}

/// A time-to-accuracy study: tinycnn, weak scaling (batch 128 per worker)
/// on 1, 2 and 4 workers over seeds, with repeats; one seed per worker count
/// aborted on 1 and 2 workers; and lr-scaling none on 2 workers, which never
/// reaches the target. A run without evaluations and a failed one are left out.
std::vector<RunRecord> tta_runs() {
  struct Case {
    int workers;
    int seed;
    std::string lr_scaling;
    std::vector<std::tuple<double, int, bool>> repeats;  // seconds, epochs, aborted
  };
  const std::vector<Case> cases = {
      {1, 1, "linear", {{20.0, 2, false}, {22.0, 2, false}}},  // two repeats of one seed
      {1, 2, "linear", {{21.0, 2, false}}},
      {1, 3, "linear", {{30.0, 3, true}}},
      {2, 1, "linear", {{12.0, 2, false}}},
      {2, 2, "linear", {{11.0, 2, false}}},
      {2, 3, "linear", {{15.0, 3, false}}},
      {2, 4, "linear", {{10.5, 2, false}}},
      {2, 5, "linear", {{16.0, 3, true}}},
      {4, 1, "linear", {{8.0, 3, false}}},
      {4, 2, "linear", {{9.0, 3, false}}},
      {2, 1, "none", {{16.0, 3, true}}},
      {2, 2, "none", {{16.5, 3, true}}},
  };
  std::vector<RunRecord> runs;
  std::int64_t id = 60;
  for (const Case& c : cases) {
    RunRecord r = run(++id, "tinycnn", "weak", c.workers, 128, {});
    r.sweep = "golden-tta";
    r.params.erase("_tool");
    r.params["seed"] = Value(c.seed);
    r.params["lr-scaling"] = Value(c.lr_scaling);
    r.params["repeats"] = Value(static_cast<int>(c.repeats.size()));
    for (const auto& [seconds, epochs, aborted] : c.repeats) {
      r.repeats.push_back(tta_repeat(static_cast<int>(r.repeats.size()) + 1, seconds, epochs, aborted));
    }
    runs.push_back(std::move(r));
  }
  RunRecord no_eval = run(++id, "lenet", "weak", 1, 64, {1000, 1010, 990});
  no_eval.sweep = "golden-tta";
  no_eval.params.erase("_tool");
  runs.push_back(no_eval);
  RunRecord oom = run(++id, "tinycnn", "weak", 8, 128, {}, "dlscale", "oom");
  oom.sweep = "golden-tta";
  oom.params.erase("_tool");
  runs.push_back(oom);
  return runs;
}

TEST(ReportGolden, TimeToAccuracyInEveryFormat) {
  const Report r = build_report(tta_runs(), {"tta", "", ""});
  ASSERT_EQ(r.tables.size(), 1u);
  const Table& t = r.tables[0];
  ASSERT_EQ(t.rows.size(), 4u);  // linear on 1, 2, 4 workers; none on 2
  ASSERT_EQ(t.headers[1], "lr-scaling");
  const std::size_t runs_col = 4, aborted_col = 5, tta_col = 6, speedup_col = 10;
  // 1 worker: 20, 22, 21 s and one aborted: olympic mean 21 (20 and 22 dropped).
  EXPECT_EQ(t.rows[0][runs_col].text, "4");
  EXPECT_EQ(t.rows[0][aborted_col].text, "1");
  EXPECT_DOUBLE_EQ(*t.rows[0][tta_col].value, 21.0);
  // 2 workers: 10.5, 11, 12, 15 s: (11 + 12) / 2; speedup 21 / 11.5.
  EXPECT_DOUBLE_EQ(*t.rows[1][tta_col].value, 11.5);
  EXPECT_DOUBLE_EQ(*t.rows[1][speedup_col].value, 21.0 / 11.5);
  // 4 workers: two runs, the plain mean.
  EXPECT_DOUBLE_EQ(*t.rows[2][tta_col].value, 8.5);
  // lr-scaling none never reached the target: no time, no speedup.
  EXPECT_EQ(t.rows[3][aborted_col].text, "2");
  EXPECT_EQ(t.rows[3][tta_col].text, "-");
  EXPECT_EQ(t.rows[3][speedup_col].text, "-");
  expect_golden("tta.txt", render(r, Format::kText));
  expect_golden("tta.md", render(r, Format::kMarkdown));
  expect_golden("tta.csv", render(r, Format::kCsv));
  expect_golden("tta.json", render(r, Format::kJson));
  // The chart draws the median successful run of each row.
  const std::vector<RunRecord> runs = tta_runs();  // the rows point into it
  const std::vector<TtaRow> rows = tta_rows(runs);
  EXPECT_DOUBLE_EQ(*representative_run(rows[0]).time_to_accuracy_s, 21.0);
  EXPECT_DOUBLE_EQ(*representative_run(rows[1]).time_to_accuracy_s, 11.0);
  EXPECT_EQ(convergence_evals(*representative_run(rows[0]).repeat).size(), 2u);
}

/// A run of `model` to 0.9 of `metric` in two evaluations (0.7, 0.9), its
/// metrics taken from its record as the results store takes them. A record
/// written before records named their metric holds only final_<metric>.
RunRecord family_tta_run(const std::string& model, const std::string& metric, bool names_metric) {
  RunRecord r = run(90, model, "weak", 1, 16, {});
  r.params.erase("_tool");
  nlohmann::json evals = nlohmann::json::array();
  for (int e = 1; e <= 2; ++e) {
    evals.push_back({{"step", 10 * e}, {"epoch", 1.0 * e}, {metric, 0.5 + 0.2 * e}, {"samples", 64},
                     {"seconds", 0.1}, {"run_seconds", 5.0 * e}});
  }
  nlohmann::json c = {{"target", 0.9},   {"status", "success"}, {"time_to_accuracy_s", 10.0},
                      {"run_s", 10.0},   {"epochs_to_target", 2.0}, {"evals", evals},
                      {"final_" + metric, 0.9}};
  if (names_metric) {
    c["metric"] = metric;
    c["final_accuracy"] = 0.9;
  }
  sweep::RepeatRecord rep;
  rep.repeat = 1;
  rep.status = "completed";
  rep.record = nlohmann::json({{"results", {{"samples_per_sec", 100.0}, {"convergence", c}}}}).dump();
  rep.metrics = sweep::extract_metrics(r.params, rep.record, "");
  r.repeats.push_back(rep);
  return r;
}

// Every family's accuracy reaches the report and the charts, whether the
// record names its metric or predates that: detection's box_acc was left
// out of a list of metric names, so ssd300's runs showed no final accuracy
// and no curve.
TEST(Report, TimeToAccuracyOfEveryFamilysMetric) {
  for (const auto& [model, metric] : std::vector<std::pair<std::string, std::string>>{
           {"resnet50", "top1"}, {"gnmt", "token_acc"}, {"ncf", "hr10"}, {"ssd300", "box_acc"}, {"toy", "r2"}}) {
    for (const bool names_metric : {true, false}) {
      if (metric == "r2" && !names_metric) continue;  // not a zoo task: only a record that names it
      SCOPED_TRACE(metric + (names_metric ? " named" : " legacy"));
      const std::vector<RunRecord> runs = {family_tta_run(model, metric, names_metric)};
      const Report r = build_report(runs, {"tta", "", ""});
      const Table& t = r.tables.at(0);
      const auto col = std::find(t.headers.begin(), t.headers.end(), "final accuracy (%)") - t.headers.begin();
      ASSERT_LT(static_cast<size_t>(col), t.headers.size()) << fmt::format("{}", fmt::join(t.headers, "|"));
      ASSERT_TRUE(t.rows.at(0).at(col).value.has_value());
      EXPECT_DOUBLE_EQ(*t.rows[0][col].value, 90.0);
      const std::vector<EvalPoint> points = convergence_evals(runs[0].repeats[0]);
      ASSERT_EQ(points.size(), 2u);
      EXPECT_DOUBLE_EQ(points[0].accuracy, 0.7);
      EXPECT_DOUBLE_EQ(points[1].run_seconds, 10.0);
      EXPECT_NE(render_html(runs, {}).find("Accuracy vs epoch"), std::string::npos);
    }
  }
}

TEST(ReportGolden, TimeToAccuracyHtml) {
  HtmlOptions o;
  o.source = "golden.db";
  const std::string html = render_html(tta_runs(), o);
  expect_golden("tta.html", html);
  EXPECT_NE(html.find("<h2 id=\"tta\">Time to accuracy"), std::string::npos);
  EXPECT_NE(html.find("Accuracy vs epoch (dashed: target 90%)"), std::string::npos);
  EXPECT_NE(html.find("Accuracy vs run time"), std::string::npos);
  EXPECT_NE(html.find("tinycnn 2 workers lr-scaling=linear"), std::string::npos);
  // Runs that did not evaluate: no section.
  EXPECT_EQ(render_html(golden_runs(), o).find("id=\"tta\""), std::string::npos);
}

TEST(Report, TimeToAccuracyNeedsRunsThatEvaluated) {
  try {
    build_report(golden_runs(), {"tta", "", ""});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "no run of sweep 'golden' evaluated accuracy (--type tta needs runs trained with "
                           "--epochs, --eval-every or --target-accuracy; docs/convergence.md)");
  }
  EXPECT_EQ(report_kind("tta").name, "tta");
}

TEST(ReportGolden, ResultsExport) {
  const auto runs = golden_runs();
  expect_golden("export.csv", export_runs({runs[0], runs[5]}, Format::kCsv));
  expect_golden("list.txt", list_runs({runs[0], runs[5]}));
}

// A completed commbench run lists its completed repeats (it showed 0/2: it
// has no samples/s, which the count went by).
TEST(Report, ListCountsCompletedRepeatsOfEveryKind) {
  RunRecord cb = commbench_run(21, 2);
  std::string list = list_runs({cb});
  EXPECT_NE(list.find(" 2/2 "), std::string::npos) << list;
  cb.repeats[1].status = "failed";
  list = list_runs({cb});
  EXPECT_NE(list.find(" 1/2 "), std::string::npos) << list;
}

TEST(Report, EfficiencyFollowsTheDefinitions) {
  const auto runs = dlscale_only();
  const auto weak = scaling_rows(runs, "weak");
  ASSERT_EQ(weak.size(), 2u);
  // lenet weak: medians 1000 (1 worker) and 1750 (2 workers) samples/s.
  const Point& w2 = weak[0].points[1].second;
  EXPECT_DOUBLE_EQ(w2.speedup, 1.75);
  const double t1 = 1000.0 * 64 / 1000, t2 = 1000.0 * 128 / 1750;  // ms per step
  EXPECT_NEAR(w2.efficiency_pct, 100 * t1 / t2, 1e-9);              // weak: t1 / tN
  const auto strong = scaling_rows(runs, "strong");
  const Point& s4 = strong[0].points[2].second;
  const double st1 = 1000.0 * 64 / 1000, st4 = 1000.0 * 64 / 2100;
  EXPECT_NEAR(s4.efficiency_pct, 100 * st1 / (4 * st4), 1e-9);      // strong: t1 / (N tN)
  EXPECT_EQ(weak[1].points[2].second.status, "oom");
  EXPECT_FALSE(weak[1].points[2].second.has_speedup);
}

// Runs that count another unit (tokens) get a table of throughput in it,
// labelled; runs that count samples only (the goldens) get none.
TEST(Report, ThroughputInTheModelsUnitWhenItIsNotSamples) {
  std::vector<RunRecord> runs = {run(1, "gnmt", "weak", 1, 16, {100, 110, 90}), run(2, "gnmt", "weak", 2, 16, {180})};
  for (RunRecord& r : runs) {
    for (sweep::RepeatRecord& rep : r.repeats) {
      rep.metrics["items_per_sec"] = 50 * rep.metrics["samples_per_sec"];
      rep.record = R"({"model": {"unit": "tokens", "items_per_sample": 50}, "results": {}})";
    }
  }
  const std::string text = render(build_report(runs, {"weak", "", ""}), Format::kText);
  const size_t table = text.find("Throughput in the model's unit (items/s)");
  ASSERT_NE(table, std::string::npos) << text;
  EXPECT_NE(text.find("tokens", table), std::string::npos) << text;
  EXPECT_NE(text.find("5000.0 ±10.0%", table), std::string::npos) << text;  // 50 x the median 100, its spread
  EXPECT_NE(text.find("9000.0", table), std::string::npos) << text;
  EXPECT_EQ(
      render(build_report(dlscale_only(), {"weak", "", ""}), Format::kText).find("model's unit"),
      std::string::npos);
}

TEST(Report, ErrorsNameWhatIsMissing) {
  const auto runs = filter_runs(dlscale_only(), "${scaling} == 'weak'");
  try {
    build_report(runs, {"strong", "", ""});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "no strong-scaling runs in the selection (the report needs runs with scaling: strong)");
  }
  try {
    build_report(runs, {"compare", "", ""});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "nothing to compare: no parameter among kind, backend, strategy, launcher or _name takes two values "
              "(name one with --compare-by)");
  }
  EXPECT_THROW(filter_runs(runs, "${nope} > 1"), Error);
  EXPECT_THROW(parse_format("yaml"), Error);
}

}  // namespace
}  // namespace dlscale::report
