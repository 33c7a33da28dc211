// Runs the real dlscale binary: exit codes, one-line errors, --help, a run.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/files.h"
#include "core/sysinfo.h"
#include "process_util.h"

namespace {

using dlscale::testing::Outcome;

Outcome run(const std::string& args) { return dlscale::testing::run_dlscale(args); }

void expect_usage_error(const std::string& args, const std::string& fragment) {
  SCOPED_TRACE(args);
  const Outcome o = run(args);
  EXPECT_EQ(o.code, 2);
  EXPECT_EQ(o.err.rfind("dlscale: error: ", 0), 0u) << o.err;
  EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << "not one line: " << o.err;
  EXPECT_NE(o.err.find(fragment), std::string::npos) << o.err;
  EXPECT_EQ(o.out.find("total samples/s"), std::string::npos) << "trained anyway";
}

TEST(Cli, BadInputIsOneLineErrorWithExitCode2) {
  expect_usage_error("train --model resnet17", "unknown model 'resnet17'; known models: lenet");
  expect_usage_error("train --model lenet --batch 0", "--batch must be in [1, 1048576] (got 0)");
  expect_usage_error("train --model lenet --steps 3 --warmup 3", "--steps (3) must be greater");
  expect_usage_error("train --model alexnet --image-size 32",
                     "model 'alexnet' needs --image-size >= 63 (got 32)");
  expect_usage_error("train --model lenet --json /nonexistent-dir/r.json",
                     "directory '/nonexistent-dir' does not exist");
  // Before any training, even as root (for whom access() allows /proc).
  expect_usage_error("train --model lenet --json /proc/r.json",
                     "cannot write '/proc/r.json': no file can be created in '/proc'");
  expect_usage_error("train --model lenet --batch abc", "--batch");
  expect_usage_error("train --no-such-flag", "--no-such-flag");
  expect_usage_error("frobnicate", "unknown command 'frobnicate'; commands: models, train");
  // Text that goes into the record and the MLPerf log is checked before any
  // work: a byte that is not UTF-8 once lost the whole run's record (issue 42).
  expect_usage_error("train --model lenet --mllog-org \"$(printf '\\377')\"",
                     "--mllog-org must be UTF-8 text without control characters (got '\\xff')");
  // Several workers: the same line as one, before any is spawned (issue 42).
  expect_usage_error("train --model lenet --workers 2 --resume /nonexistent-ckpt.bin",
                     "dlscale: error: cannot read '/nonexistent-ckpt.bin': No such file or directory\n");
  expect_usage_error("train --model lenet --mllog-platform \"$(printf 'a\\nb')\"",
                     "--mllog-platform must be UTF-8 text without control characters (got 'a\\nb')");
}

// DLSCALE_LOG_LEVEL (docs/errors.md): a value that is not a level is named
// in one line, exit 2; a level runs.
TEST(Cli, ALogLevelThatIsNotOneIsAUsageError) {
  const std::string binary = DLSCALE_BINARY;
  const Outcome bad =
      dlscale::testing::run_shell("DLSCALE_LOG_LEVEL=loud " + binary + " models --help");
  EXPECT_EQ(bad.code, 2);
  EXPECT_EQ(bad.err,
            "dlscale: error: DLSCALE_LOG_LEVEL='loud' must be debug, info, warn or error\n");
  const Outcome debug =
      dlscale::testing::run_shell("DLSCALE_LOG_LEVEL=debug " + binary + " models --help");
  EXPECT_EQ(debug.code, 0) << debug.err;
}

// The front starts dlscale-torch with a short OpenMP spin unless the
// environment sets the wait itself (core/sysinfo.h, default_openmp_wait);
// the record says which was in effect.
TEST(Cli, TheFrontShortensOpenMpsSpinUnlessTheEnvironmentSetsIt) {
  const std::string record = dlscale::testing::temp_path("omp.json");
  for (const auto& [env, expected] :
       {std::pair{"env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT", "GOMP_SPINCOUNT=10000"},
        std::pair{"env -u GOMP_SPINCOUNT OMP_WAIT_POLICY=passive", "OMP_WAIT_POLICY=passive"}}) {
    const Outcome o =
        dlscale::testing::run_shell(std::string(env) + " " + DLSCALE_BINARY +
                                    " train --model lenet --batch 4 --steps 2 --warmup 1 --threads "
                                    "1 --display-every 0 --json " +
                                    record);
    ASSERT_EQ(o.code, 0) << o.err;
    const auto r = nlohmann::json::parse(dlscale::read_file(record));
    EXPECT_EQ(r["environment"]["openmp_wait"], expected) << env;
  }
  std::filesystem::remove(record);
}

// The front loads dlscale-torch with OpenBLAS's pool deferred unless the
// environment sizes it (core/sysinfo.h, defer_blas_pool): one thread after
// the load instead of one a core, and --threads still sizes the pool the run
// computes with. A size the environment gives is kept.
TEST(Cli, TheFrontDefersOpenBlasPoolUnlessTheEnvironmentSizesIt) {
  const std::string record = dlscale::testing::temp_path("blas.json");
  const std::string run =
      std::string(DLSCALE_BINARY) +
      " train --model lenet --batch 4 --steps 2 --warmup 1 --threads 2 --display-every 0 "
      "--json " +
      record;
  const std::string env =
      "env -u OPENBLAS_NUM_THREADS -u GOTO_NUM_THREADS -u OMP_NUM_THREADS DLSCALE_LOG_LEVEL=debug ";
  const Outcome deferred = dlscale::testing::run_shell(env + run);
  ASSERT_EQ(deferred.code, 0) << deferred.err;
  EXPECT_NE(deferred.err.find("1 thread(s) after loading LibTorch, OpenBLAS's pool deferred"),
            std::string::npos)
      << deferred.err;
  EXPECT_EQ(nlohmann::json::parse(dlscale::read_file(record))["environment"]["blas_threads"], 2);
  const Outcome sized = dlscale::testing::run_shell(env + "OPENBLAS_NUM_THREADS=1 " + run);
  ASSERT_EQ(sized.code, 0) << sized.err;
  EXPECT_NE(sized.err.find("OpenBLAS's pool as the environment sized it"), std::string::npos)
      << sized.err;
  EXPECT_EQ(nlohmann::json::parse(dlscale::read_file(record))["environment"]["blas_threads"], 2);
}

// The build's stand-ins of LibTorch's unused libraries (scripts/libtorch_unused.sh):
// the front puts them first on dlscale-torch's library path, and every
// symbol still resolves when the loader binds them all at once
// (LD_BIND_NOW): none of them was taken from the libraries left out.
TEST(Cli, TheFrontLeavesOutLibTorchsUnusedLibraries) {
  const std::string build = std::filesystem::path(DLSCALE_BINARY).parent_path().string();
  const bool stand_ins = std::filesystem::is_directory(build + "/" + dlscale::kUnusedLibsDir);
  const std::string run = std::string(DLSCALE_BINARY) + " models lenet";
  const Outcome o = dlscale::testing::run_shell("DLSCALE_LOG_LEVEL=debug " + run);
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.err.find(stand_ins ? "LibTorch's unused libraries left out"
                                 : "LibTorch's unused libraries loaded"),
            std::string::npos)
      << o.err;
  const Outcome bound = dlscale::testing::run_shell("LD_BIND_NOW=1 " + run);
  ASSERT_EQ(bound.code, 0) << bound.err;
  EXPECT_NE(bound.out.find("lenet"), std::string::npos) << bound.out;
}

// Numbers out of range are one-line errors naming the flag, exit 2: never a
// wrapped value, an overflow inside LibTorch (exit 1), an allocation that
// fails (exit 3), an infinite timeout or thousands of forked workers.
TEST(Cli, NumbersOutOfRangeAreUsageErrors) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--steps 99999999999999999999", "--steps: '99999999999999999999' is out of range for a 64-bit integer"},
      {"--steps 2000000000", "--steps must be at most 1000000000 (got 2000000000)"},
      {"--batch 99999999999999999999", "--batch: '99999999999999999999' is out of range"},
      {"--batch 4000000000", "--batch must be in [1, 1048576] (got 4000000000)"},
      {"--global-batch 99999999999", "--global-batch must be in [0, 1073741824]"},
      {"--lr 1e308", "--lr must be in (0, 1e+06] (got 1e+308)"},
      {"--lr 1e400", "--lr: '1e400' is not a finite number"},
      {"--lr nan", "--lr: 'nan' is not a finite number"},
      {"--timeout inf", "--timeout: 'inf' is not a finite number"},
      {"--timeout 1e9", "--timeout must be in (0, 1e+07] seconds (got 1000000000)"},
      {"--workers 100000", "--workers must be in [1, 1024] (got 100000)"},
      {"--threads 100000", "--threads must be in [0, 1024] (got 100000)"},
      {"--image-size 100000", "--image-size must be in [0, 4096] (got 100000"},
      {"--classes 99999999", "--classes must be in [0, 1000000]"},
      {"--synthetic-batches 1000000", "--synthetic-batches must be in [1, 4096]"},
      {"--weight-decay 1e300", "--weight-decay must be in [0, 1e+06]"},
      {"--bucket-mb 1e12", "--bucket-mb must be at most 1e+06"},
      {"--seed -1", "--seed: '-1' is not a non-negative integer"},
      {"--strategy ps --ps-shards 5000 --ps-placement dedicated", "--ps-shards must be at most 1024"}};
  for (const auto& [flags, fragment] : cases) {
    SCOPED_TRACE(flags);
    expect_usage_error("train --model lenet --warmup 1 " + flags, fragment);
  }
}

// What the checks above let through, a number too big for a 32-bit flag,
// once gave CLI11's raw "Could not convert"; and a strong-scaling share
// over the per-worker cap was blamed on --batch, which was not given.
TEST(Cli, ValuesTooLargeForTheirFlagNameTheFlag) {
  expect_usage_error("commbench --iters 100000000000",
                     "--iters: '100000000000' is out of range; this flag takes whole numbers up to "
                     "2147483647");
  expect_usage_error("commbench --warmup -100000000000",
                     "--warmup: '-100000000000' is out of range; this flag takes whole numbers from "
                     "-2147483648");
  expect_usage_error("commbench --iters 1e11", "--iters: '1e11' is not an integer");
  expect_usage_error("train --model lenet --global-batch 1073741824",
                     "--global-batch 1073741824 over 1 worker(s) is 1073741824 per worker, over the "
                     "per-worker cap of 1048576");
}

TEST(Cli, HelpExplainsEveryTrainFlag) {
  const Outcome o = run("train --help");
  EXPECT_EQ(o.code, 0);
  for (const char* flag : {"--model", "--batch", "--steps", "--warmup", "--threads", "--image-size",
                           "--classes", "--lr", "--optimizer", "--seed", "--json", "--momentum",
                           "--weight-decay", "--display-every", "--device", "--data",
                           "--data-threads", "--prefetch", "--cache", "--augment", "--no-shuffle",
                           "--data-order", "--shuffle-buffer", "--skip-corrupt", "--stage-dir"}) {
    EXPECT_NE(o.out.find(flag), std::string::npos) << flag;
  }
  const Outcome data = run("data --help");
  EXPECT_EQ(data.code, 0);
  for (const char* command : {"pack", "inspect", "verify", "bench"}) {
    EXPECT_NE(data.out.find(command), std::string::npos) << command;
  }
}

// A full device: the message says so and the exit code is the storage one (6).
bool lower_word(const std::string& w) {
  return !w.empty() && std::all_of(w.begin(), w.end(), [](char c) { return std::islower(static_cast<unsigned char>(c)); });
}

/// A README synopsis entry: the commands it names ("results list|show
/// ID|export" names three) and the --flags on its lines.
struct SynopsisEntry {
  std::vector<std::string> commands;
  std::set<std::string> flags;
};

/// The commands a synopsis line names after "dlscale ".
std::vector<std::string> synopsis_commands(const std::string& rest) {
  std::istringstream words(rest);
  std::string base, word;
  std::vector<std::string> alternatives;
  while (words >> word && word[0] != '-' && word[0] != '[' && word[0] != '(') {
    if (word.find('|') == std::string::npos) {
      if (!lower_word(word)) continue;  // an argument (SRC, ID, PATH)
      if (alternatives.empty()) base += (base.empty() ? "" : " ") + word;
      continue;
    }
    std::istringstream parts(word);
    for (std::string part; std::getline(parts, part, '|');) {
      if (lower_word(part)) alternatives.push_back(part);
    }
  }
  if (alternatives.empty()) return {base};
  for (std::string& a : alternatives) a = base + " " + a;
  return alternatives;
}

/// The README's "## Commands" synopsis, up to the first unindented line.
std::vector<SynopsisEntry> readme_synopsis() {
  std::ifstream in(std::string(DLSCALE_SOURCE_DIR) + "/README.md");
  std::vector<SynopsisEntry> entries;
  std::string line;
  bool inside = false;
  const std::regex flag("--[a-z][a-z0-9-]*");
  while (std::getline(in, line)) {
    if (line.rfind("## ", 0) == 0) inside = line == "## Commands";
    if (inside && !entries.empty() && !line.empty() && line.rfind("    ", 0) != 0) break;
    if (!inside || line.rfind("    ", 0) != 0) continue;
    if (line.rfind("    dlscale ", 0) == 0) entries.push_back({synopsis_commands(line.substr(12)), {}});
    if (entries.empty()) continue;
    for (auto it = std::sregex_iterator(line.begin(), line.end(), flag); it != std::sregex_iterator(); ++it) {
      entries.back().flags.insert(it->str());
    }
  }
  return entries;
}

TEST(Cli, EveryFlagOfTheReadmesSynopsisIsInItsCommandsHelp) {
  const auto entries = readme_synopsis();
  ASSERT_GE(entries.size(), 10u);
  size_t flags = 0;
  for (const SynopsisEntry& e : entries) {
    std::string help;
    for (const std::string& command : e.commands) {
      const Outcome o = run(command + " --help");
      ASSERT_EQ(o.code, 0) << command << ": " << o.err;
      help += o.out;
    }
    for (const std::string& name : e.flags) {
      ++flags;
      // A flag ends where the help's name column does: ',' ' ' '=' '{' or the line.
      const std::regex listed(name + "([ ,={\\n]|$)");
      EXPECT_TRUE(std::regex_search(help, listed))
          << "README's `dlscale " << e.commands.front() << "` shows " << name << ", which its --help does not list";
    }
  }
  EXPECT_GE(flags, 100u);
}

TEST(Cli, NoSpaceLeftIsTheStorageExitCode) {
  const Outcome o = run("train --model lenet --batch 8 --steps 2 --warmup 1 --threads 1 --display-every 0 "
                        "--json /dev/full");
  EXPECT_EQ(o.code, 6) << o.err;
  EXPECT_EQ(o.err, "dlscale: error: cannot write '/dev/full': no space left on the device\n");
}

// The named models only, in the order named (the whole zoo runs every
// model once, about 30 s; make run lists it).
TEST(Cli, ModelsTable) {
  const Outcome o = run("models resnet50 lenet");
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("25,557,032"), std::string::npos);
  EXPECT_NE(o.out.find("8.178"), std::string::npos);  // resnet50 GFLOPs at 224
  EXPECT_NE(o.out.find("3,274,634"), std::string::npos);  // lenet
  EXPECT_LT(o.out.find("resnet50"), o.out.find("lenet"));
  EXPECT_EQ(o.out.find("resnet18"), std::string::npos);
  const Outcome bad = run("models resnet50 nosuchnet");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("unknown model 'nosuchnet'"), std::string::npos) << bad.err;
  EXPECT_EQ(bad.out, "");
}

TEST(Cli, TrainRunWritesRecord) {
  const std::string path = std::filesystem::temp_directory_path().string() + "/dlscale_cli_" +
                           std::to_string(::getpid()) + ".json";
  const Outcome o =
      run("train --model lenet --batch 8 --steps 4 --warmup 1 --threads 1 --json " + path);
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("total samples/s"), std::string::npos);
  EXPECT_NE(o.out.find("breakdown (median ms)"), std::string::npos);
  const auto j = nlohmann::json::parse(dlscale::read_file(path));
  std::filesystem::remove(path);
  EXPECT_EQ(j["inputs"]["model"], "lenet");
  EXPECT_GT(j["results"]["samples_per_sec"].get<double>(), 0);
}

// A path that is not UTF-8 (Linux allows any byte) goes into the record and
// its command line: the record is written with U+FFFD for the byte, not
// lost after the whole run to a strict JSON dump (issue 42).
TEST(Cli, ARecordWhosePathsAreNotUtf8IsWritten) {
  const std::string dir = dlscale::testing::temp_path("bytes\xff");
  std::filesystem::create_directories(dir);
  const Outcome o = run("train --model lenet --batch 8 --steps 3 --warmup 1 --threads 1 --json '" + dir +
                        "/r.json' --mllog '" + dir + "/m.log'");
  ASSERT_EQ(o.code, 0) << o.err;
  const auto j = nlohmann::json::parse(dlscale::read_file(dir + "/r.json"));
  EXPECT_NE(j.dump().find("bytes\xef\xbf\xbd/r.json"), std::string::npos);
  EXPECT_GT(dlscale::read_file(dir + "/m.log").size(), 0u);
  dlscale::remove_tree(dir);
}

}  // namespace

namespace {

/// A copy of the dlscale executable alone in a fresh directory (no
/// dlscale-torch beside it).
std::string lone_front() {
  const std::string dir = dlscale::testing::temp_path("lone");
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(DLSCALE_BINARY, dir + "/dlscale");
  return dir;
}

}  // namespace

// `dlscale` loads no LibTorch (docs/architecture.md, "Two executables"):
// neither it nor any library it needs is LibTorch, so the commands that do
// not train start at once.
TEST(TwoExecutables, TheFrontLinksNoLibTorch) {
  const Outcome o = dlscale::testing::run_shell(std::string("ldd ") + DLSCALE_BINARY);
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("libc.so"), std::string::npos) << o.out;
  for (const char* lib : {"libtorch", "libc10", "libgloo", "libmpi"}) {
    EXPECT_EQ(o.out.find(lib), std::string::npos) << lib << " in\n" << o.out;
  }
  const std::string torch = std::filesystem::path(DLSCALE_BINARY).parent_path().string() + "/dlscale-torch";
  const Outcome t = dlscale::testing::run_shell("ldd " + torch);
  EXPECT_NE(t.out.find("libtorch"), std::string::npos) << t.out;
}

// Without dlscale-torch beside it, the torch-free commands still work and a
// command that trains is one line naming what is missing.
TEST(TwoExecutables, WithoutTheTorchExecutableTrainingIsNamed) {
  const std::string dir = lone_front();
  const Outcome version = dlscale::testing::run_shell(dir + "/dlscale --version");
  EXPECT_EQ(version.code, 0) << version.err;
  // The sweep planner checks parameters against train's flags without LibTorch.
  const Outcome plan = dlscale::testing::run_shell(dir + "/dlscale sweep --dry-run " DLSCALE_SOURCE_DIR
                                                   "/examples/quickstart.yaml");
  EXPECT_EQ(plan.code, 0) << plan.err;
  EXPECT_NE(plan.out.find("resnet18"), std::string::npos) << plan.out;
  const Outcome help = dlscale::testing::run_shell(dir + "/dlscale train --help");
  EXPECT_EQ(help.code, 0) << help.err;
  EXPECT_NE(help.out.find("--strategy"), std::string::npos);
  const Outcome predict_help = dlscale::testing::run_shell(dir + "/dlscale predict --help");
  EXPECT_EQ(predict_help.code, 0) << predict_help.err;  // predict runs here until it needs the zoo
  for (const std::string args : {"train --model lenet", "commbench", "models",
                                 "predict --model resnet50 --device-rate 100 --batch 32 --link-gbps 1",
                                 "data bench --data synthetic"}) {
    SCOPED_TRACE(args);
    const Outcome o = dlscale::testing::run_shell(dir + "/dlscale " + args);
    EXPECT_EQ(o.code, 2);
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
    EXPECT_NE(o.err.find("needs " + dir + "/dlscale-torch, which could not be started: No such file"),
              std::string::npos)
        << o.err;
  }
  // train's usage errors that need neither LibTorch nor the zoo are the
  // front's own: the same line, without dlscale-torch.
  for (const auto& [args, fragment] :
       {std::pair{"train --model lenet --batch 0", "--batch must be in [1, 1048576] (got 0)"},
        std::pair{"train --model lenet --steps 3 --warmup 3", "--steps (3) must be greater"},
        std::pair{"train --model lenet --lr 1e308", "--lr must be in (0, 1e+06] (got 1e+308)"},
        std::pair{"train --model lenet --workers 100000",
                  "--workers must be in [1, 1024] (got 100000)"},
        std::pair{"train --model lenet --lr-end-factor 2",
                  "--lr-end-factor must be in [0, 1] (got 2)"},
        std::pair{"train --model lenet --warmup 1 --json /proc/r.json",
                  "cannot write '/proc/r.json'"},
        std::pair{"train --model lenet --cluster lab --nnodes 2",
                  "--nnodes cannot be given with --cluster"}}) {
    SCOPED_TRACE(args);
    const Outcome o = dlscale::testing::run_shell(dir + "/dlscale " + args);
    EXPECT_EQ(o.code, 2);
    EXPECT_EQ(o.err.rfind("dlscale: error: ", 0), 0u) << o.err;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
    EXPECT_NE(o.err.find(fragment), std::string::npos) << o.err;
  }
  // There but not executable: the hint is chmod, not a build (issue 42).
  const std::string torch = dir + "/dlscale-torch";
  dlscale::write_file_atomic(torch, "#!/bin/sh\n");
  std::filesystem::permissions(torch, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  const Outcome no_x = dlscale::testing::run_shell(dir + "/dlscale train --model lenet");
  EXPECT_EQ(no_x.code, 2);
  EXPECT_NE(no_x.err.find("could not be started: Permission denied (make it executable with 'chmod +x " + torch +
                          "')"),
            std::string::npos)
      << no_x.err;
  // Bad flags of a LibTorch command are refused by the front itself.
  const Outcome bad = dlscale::testing::run_shell(dir + "/dlscale train --no-such-flag");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("--no-such-flag"), std::string::npos) << bad.err;
  dlscale::remove_tree(dir);
}

// The hand-over keeps the command line: dlscale-torch runs with dlscale's
// arguments, argv[0] included, and the record says so. (It is exec(2), so
// the pid and environment stay too: the mpirun tests train through it.)
TEST(TwoExecutables, TheHandOverKeepsTheCommandLine) {
  const std::string json = dlscale::testing::temp_path("r.json");
  const Outcome o = run("train --model lenet --steps 2 --warmup 1 --batch 4 --threads 1 --json " + json);
  ASSERT_EQ(o.code, 0) << o.err;
  const auto record = nlohmann::json::parse(dlscale::read_file(json));
  const std::vector<std::string> expected = {DLSCALE_BINARY, "train", "--model", "lenet", "--steps", "2",
                                             "--warmup", "1", "--batch", "4", "--threads", "1", "--json", json};
  EXPECT_EQ(record.at("argv").get<std::vector<std::string>>(), expected);
  std::filesystem::remove(json);
}
