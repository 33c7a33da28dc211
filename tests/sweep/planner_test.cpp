#include "sweep/planner.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <sstream>

#include "core/error.h"
#include "sweep/runner.h"
#include "train/train_options.h"

namespace dlscale::sweep {
namespace {

std::vector<PlannedRun> plan(const std::string& yaml, std::set<std::string> train = {}) {
  return plan_sweep(parse_sweep(yaml, "test.yaml"), {std::move(train), {}});
}

std::string plan_error(const std::string& yaml, std::set<std::string> train = {}) {
  try {
    plan(yaml, std::move(train));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string text(const PlannedRun& r, const std::string& name) { return param_text(r.params, name, "<unset>"); }

TEST(Planner, CartesianProductFirstVariableSlowest) {
  const auto runs = plan(R"Y(
parameters: {model: lenet, batch: 8}
variables:
  workers: [1, 2, 4]
  backend: [gloo, mpi]
)Y");
  ASSERT_EQ(runs.size(), 6u);
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"1", "gloo"}, {"1", "mpi"}, {"2", "gloo"}, {"2", "mpi"}, {"4", "gloo"}, {"4", "mpi"}};
  for (std::size_t i = 0; i < runs.size(); ++i) {
    EXPECT_EQ(runs[i].index, static_cast<int>(i) + 1);
    EXPECT_EQ(text(runs[i], "workers"), expected[i].first);
    EXPECT_EQ(text(runs[i], "backend"), expected[i].second);
    EXPECT_FALSE(runs[i].skipped());
  }
  // Defaults every run gets.
  EXPECT_EQ(text(runs[0], "kind"), "dlscale");
  EXPECT_EQ(text(runs[0], "launcher"), "local");
  EXPECT_EQ(text(runs[0], "scaling"), "weak");
  EXPECT_EQ(text(runs[0], "repeats"), "1");
}

TEST(Planner, WeakAndStrongBatchDerivation) {
  const auto runs = plan(R"Y(
parameters: {model: lenet, batch: 96}
variables:
  scaling: [weak, strong]
  workers: [1, 2, 5]
)Y");
  ASSERT_EQ(runs.size(), 6u);
  // weak: batch per worker fixed, global grows.
  EXPECT_EQ(text(runs[1], "batch"), "96");
  EXPECT_EQ(text(runs[1], "global-batch"), "192");
  EXPECT_EQ(text(runs[2], "global-batch"), "480");
  // strong: global fixed, batch per worker = global / workers.
  EXPECT_EQ(text(runs[4], "batch"), "48");
  EXPECT_EQ(text(runs[4], "global-batch"), "96");
  EXPECT_TRUE(runs[5].skipped());
  EXPECT_EQ(runs[5].skip_reason, "strong scaling: global batch 96 is not divisible by 5 workers");
  EXPECT_FALSE(runs[3].skipped());
}

// accumulate: the global batch holds every micro-batch of every worker.
TEST(Planner, AccumulationCountsInTheGlobalBatch) {
  const auto runs = plan(R"Y(
parameters: {model: lenet, batch: 96, workers: 2}
variables:
  scaling: [weak, strong]
  accumulate: [1, 4, 5]
)Y");
  ASSERT_EQ(runs.size(), 6u);
  EXPECT_EQ(text(runs[0], "global-batch"), "192");
  EXPECT_EQ(text(runs[1], "global-batch"), "768");  // 96 x 2 workers x 4
  EXPECT_EQ(text(runs[1], "batch"), "96");
  EXPECT_EQ(text(runs[4], "batch"), "12");  // 96 / (2 workers x 4)
  EXPECT_EQ(text(runs[4], "global-batch"), "96");
  EXPECT_TRUE(runs[5].skipped());
  EXPECT_EQ(runs[5].skip_reason,
            "strong scaling: global batch 96 is not divisible by 2 workers x accumulate 5");
}

TEST(Planner, ExtensionsSetAndSkipInOrder) {
  const auto runs = plan(R"Y(
parameters: {batch: 32, lr: 0.1}
variables:
  model: [lenet, resnet18, vgg11]
  workers: [1, 2]
extensions:
  - when: {model: lenet}
    set: {image-size: 28, batch: 64}
  - when: {model: [resnet18, vgg11], workers: 2}
    set: {lr: 0.2}
  - when: {model: vgg11}
    skip: true
  - when: "$( ${workers} > 1 and ${model} == 'lenet' )"
    set: {backend: mpi}
)Y");
  ASSERT_EQ(runs.size(), 6u);
  EXPECT_EQ(text(runs[0], "image-size"), "28");
  EXPECT_EQ(text(runs[0], "batch"), "64");
  EXPECT_EQ(text(runs[0], "backend"), "<unset>");
  EXPECT_EQ(text(runs[1], "backend"), "mpi");
  EXPECT_EQ(text(runs[2], "image-size"), "<unset>");
  EXPECT_EQ(text(runs[2], "lr"), "0.1");
  EXPECT_EQ(text(runs[3], "lr"), "0.2");
  EXPECT_TRUE(runs[4].skipped());
  EXPECT_EQ(runs[4].skip_reason, "extension 3 (when model=vgg11)");
  EXPECT_TRUE(runs[5].skipped());
}

TEST(Planner, RunsMadeIdenticalByExtensionsRunOnce) {
  const auto runs = plan(R"Y(
parameters: {model: lenet, batch: 8}
variables: {bucket-mb: [0, 25], workers: [1, 2]}
extensions:
  - when: {workers: 1}
    set: {bucket-mb: 25}    # one worker exchanges nothing: the bucket size does not matter
)Y");
  ASSERT_EQ(runs.size(), 4u);
  EXPECT_FALSE(runs[0].skipped());
  EXPECT_FALSE(runs[1].skipped());
  EXPECT_EQ(runs[2].skip_reason, "same parameters as run 1");
  EXPECT_FALSE(runs[3].skipped());
}

TEST(Planner, ComputedValuesInDependencyOrder) {
  const auto runs = plan(R"Y(
parameters:
  model: resnet18
  lr: "$( 0.1 * ${batch} * ${workers} / 256 )"
  batch: "$( ${_base} * 2 )"
  _base: 16
  trace: "trace-${model}-w${workers}.json"
  backend: "$( 'mpi' if ${workers} > 2 else 'gloo' )"
variables:
  workers: [2, 4]
)Y");
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].params.at("batch"), Value(32));
  EXPECT_EQ(runs[0].params.at("lr"), Value(0.025));
  EXPECT_EQ(text(runs[0], "trace"), "trace-resnet18-w2.json");
  EXPECT_EQ(text(runs[0], "backend"), "gloo");
  EXPECT_EQ(text(runs[1], "backend"), "mpi");
  EXPECT_EQ(runs[1].params.at("lr"), Value(0.05));
}

TEST(Planner, ErrorsNameTheParameter) {
  EXPECT_EQ(plan_error("parameters: {batch: 8, a: '${b}', b: '$( ${a} + 1 )'}"),
            "parameter 'a' depends on itself: a -> b -> a");
  EXPECT_EQ(plan_error("parameters: {batch: 8, lr: '$( ${nope} * 2 )'}"),
            "parameter 'lr': unknown name 'nope' in ${nope} (parameters: batch, lr)");
  EXPECT_EQ(plan_error("parameters: {batch: 8, lr: '$( 1 + )'}"),
            "parameter 'lr': expression ' 1 + ' at position 6: unexpected end of expression");
  EXPECT_EQ(plan_error("parameters: {batch: 8, bacth: 9}", {"batch", "model"}),
            "parameter 'bacth' is not a 'dlscale train' option (see 'dlscale train --help'; names starting with '_' "
            "are free for your own values)");
  EXPECT_EQ(plan_error("parameters: {model: lenet}"),
            "parameter 'batch' is not set (per-worker batch for weak scaling, global batch for strong scaling)");
  EXPECT_EQ(plan_error("parameters: {batch: 8, scaling: linear}"), "parameter 'scaling' is 'linear'; allowed: weak, strong");
  EXPECT_EQ(plan_error("parameters: {batch: 8, workers: 0}"),
            "parameter 'workers' must be a whole number in [1, 1024] (got '0')");
  // Huge numbers are errors, not wrapped counts or "completed" runs of 0 repeats.
  EXPECT_EQ(plan_error("parameters: {batch: 8, repeats: 1e19}"),
            "parameter 'repeats' must be a whole number in [1, 1000] (got '1e+19')");
  EXPECT_EQ(plan_error("parameters: {batch: 8, workers: 1e19}"),
            "parameter 'workers' must be a whole number in [1, 1024] (got '1e+19')");
  EXPECT_EQ(plan_error("parameters: {batch: 1e19}"),
            "parameter 'batch' must be a whole number in [1, 1073741824] (got '1e+19')");
  EXPECT_EQ(plan_error("parameters: {batch: 8, timeout: .inf}"),
            "parameter 'timeout' must be seconds in (0, 1e7] (got '.inf')");
  EXPECT_EQ(plan_error("parameters: {batch: 8, kind: external}"),
            "parameter 'command' (the program to run) is required when kind is external");
  // A bad throughput pattern fails at plan time, before any run.
  EXPECT_NE(plan_error("parameters: {batch: 8, kind: external, command: x, throughput-pattern: '(['}")
                .find("parameter 'throughput-pattern' '([' is not a valid regular expression"),
            std::string::npos);
  EXPECT_EQ(plan_error("parameters: {batch: 8, kind: external, command: x, throughput-pattern: 'x'}"),
            "parameter 'throughput-pattern' 'x' needs one (group) around the number");
  EXPECT_EQ(plan_error("parameters: {batch: 8}\nextensions: [{when: {modle: x}, skip: true}]"),
            "extension 1: 'when' names 'modle', which is not a parameter of the sweep");
}

// The sweep's name is a directory under --output-dir, a Slurm job's name and
// a comment line of its script: a name that is a path (or '.', '..') would
// put run logs outside it, and a newline ran commands in the job (issue 42).
TEST(Planner, SweepNamesOutsideTheSafeSetAreRefused) {
  const std::string rule =
      "' must be 1 to 128 of letters, digits, spaces and . _ - + = , @ ( ), not starting with '.', '-' or a "
      "space (it names the directory of the sweep's run logs and its Slurm jobs)";
  for (const std::string name : {"../../etc", "a/b", "..", ".", ".hidden", "-x", " lead", "trail ", "a;b", "a$b",
                                 "a`b`", "a\"b", "a\\b", "a*", "x#y", "a|b", "a<b"}) {
    EXPECT_EQ(plan_error("name: '" + name + "'\nparameters: {batch: 8}"),
              "test.yaml:1: sweep name '" + (name == "a\\b" ? std::string("a\\\\b") : name) + rule)
        << name;
  }
  // YAML's escapes get past the file's byte check; the name's check stops them.
  EXPECT_EQ(plan_error("name: \"inj1\\ntouch PWNED\\n#\"\nparameters: {batch: 8}"),
            "test.yaml:1: sweep name 'inj1\\ntouch PWNED\\n#" + rule);
  EXPECT_EQ(plan_error("name: \"a\\tb\"\nparameters: {batch: 8}"), "test.yaml:1: sweep name 'a\\tb" + rule);
  EXPECT_EQ(plan_error("name: \"caf\\u00e9\"\nparameters: {batch: 8}"),
            "test.yaml:1: sweep name 'caf\u00e9" + rule);
  EXPECT_NE(plan_error("name: '" + std::string(129, 'x') + "'\nparameters: {batch: 8}").find("1 to 128"),
            std::string::npos);
  EXPECT_EQ(plan("name: 'my study-2 (v1)'\nparameters: {batch: 8}").size(), 1u);
  EXPECT_EQ(plan("name: 'a_b.c+d=e,f@g'\nparameters: {batch: 8}").size(), 1u);
  EXPECT_THROW(check_sweep_name("../x"), Error);
  EXPECT_THROW(check_sweep_name("x\n#SBATCH --uid=0"), Error);
}

// A value (or a parameter's name) decoded from a YAML escape reaches the
// job script's comment (the run's tag: strategy, compress, '_' parameters),
// the dlscale command line and the logs: control characters are refused.
TEST(Planner, ControlCharactersInDecodedValuesAreRefused) {
  const std::string tail = "' holds a control character, or an escape that is not UTF-8 text";
  EXPECT_EQ(plan_error("parameters: {batch: 8, strategy: \"allreduce\\n#SBATCH --x\"}"),
            "test.yaml:1: the value 'allreduce\\n#SBATCH --x" + tail);
  EXPECT_EQ(plan_error("parameters: {batch: 8, _tag: \"a\\rb\"}"), "test.yaml:1: the value 'a\\rb" + tail);
  EXPECT_EQ(plan_error("parameters: {batch: 8}\nvariables: {compress: [none, \"fp16\\x1b[2J\"]}"),
            "test.yaml:2: the value 'fp16\\x1b[2J" + tail);
  EXPECT_EQ(plan_error("parameters: {batch: 8}\nextensions: [{when: {batch: 8}, set: {_n: \"\\0\"}}]"),
            "test.yaml:2: the value '\\x00" + tail);
  EXPECT_EQ(plan_error("parameters: {batch: 8, \"a\\nb\": 1}"),
            "test.yaml:1: 'a\\nb' is not a valid parameter name (letters, digits, '-' and '_')");
  EXPECT_EQ(plan("parameters: {batch: 8, _note: \"caf\\u00e9 \\u2014 ok\"}").size(), 1u);
}

TEST(Planner, MalformedFilesGiveOneLineErrors) {
  EXPECT_EQ(plan_error("parameters: [1, 2]"), "test.yaml:1: 'parameters' must be a mapping of name: value");
  EXPECT_EQ(plan_error("parameters: {batch: 8}\nvaribles: {workers: [1]}"),
            "test.yaml:2: unknown key 'varibles' (allowed: name, parameters, variables, extensions, scaling)");
  EXPECT_EQ(plan_error("parameters: {batch: 8}\nvariables: {workers: []}"),
            "test.yaml:2: variable 'workers' has an empty list");
  EXPECT_EQ(plan_error("parameters: {batch: 8\n"), "test.yaml:2: not valid YAML: end of map flow not found");
  EXPECT_EQ(plan_error("extensions: [{when: {model: a}}]"), "test.yaml:1: extension 1 needs 'set' or 'skip: true'");
  EXPECT_EQ(plan_error("- 1\n- 2"), "test.yaml: a sweep file is a mapping with 'parameters', 'variables' and 'extensions'");
  // Bytes that would reach terminals and the store verbatim (found by fuzz_sweep_file:
  // invalid UTF-8 once threw out of the JSON run key, exit 1).
  EXPECT_EQ(plan_error("parameters: {batch: 8}\nvariables: {model: [\"le\xffnet\"]}"),
            "test.yaml:2: not valid UTF-8 text (byte 0xff)");
  EXPECT_EQ(plan_error("parameters: {batch: 8, model: \"\x1b[31mred\"}"),
            "test.yaml:1: control character 0x1b in the file");
  EXPECT_EQ(plan("parameters: {batch: 8, _note: \"caf\xc3\xa9 \xe2\x9c\x93\"}").size(), 1u);  // UTF-8 is fine
  // A second block would silently replace the first; 'scaling' anywhere counts once.
  EXPECT_EQ(plan_error("parameters: {batch: 8}\nvariables: {workers: [1]}\nparameters: {steps: 5}"),
            "test.yaml:3: 'parameters' appears twice (lines 1 and 3); merge them");
  EXPECT_EQ(plan_error("scaling: strong\nparameters: {batch: 8, scaling: weak}"),
            "test.yaml:2: 'scaling' is set both at the top level and in 'parameters'");
  // Templates that double each other stop at 1 MiB; many variables cannot overflow the run count.
  std::string doubling = "parameters: {batch: 8, _a0: xxxxxxxxxxxxxxxx";
  for (int i = 1; i <= 20; ++i) doubling += fmt::format(", _a{}: '${{_a{}}}${{_a{}}}'", i, i - 1, i - 1);
  EXPECT_NE(plan_error(doubling + "}").find("expands to more than 1 MiB of text"), std::string::npos);
  std::string many = "parameters: {batch: 8}\nvariables: {";
  for (int i = 0; i < 70; ++i) many += fmt::format("{}_v{}: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]", i ? ", " : "", i);
  EXPECT_EQ(plan_error(many + "}"), "test.yaml: the variables give more than 100000 runs");
  const auto strong = plan("scaling: strong\nparameters: {batch: 8, workers: 2}");
  ASSERT_EQ(strong.size(), 1u);
  EXPECT_EQ(param_text(strong[0].params, "scaling"), "strong");  // not dropped by the later block
}

TEST(Planner, RunKeyIgnoresRepeatsAndTimeout) {
  const auto a = plan("parameters: {batch: 8, repeats: 3, timeout: 60}");
  const auto b = plan("parameters: {batch: 8, repeats: 5, timeout: 10}");
  const auto c = plan("parameters: {batch: 16, repeats: 3, timeout: 60}");
  EXPECT_EQ(a[0].key, b[0].key);
  EXPECT_NE(a[0].key, c[0].key);
  // YAML's '8' and '8.0' are the same number; quoted '8' is text.
  EXPECT_EQ(plan("parameters: {batch: 8.0}")[0].key, plan("parameters: {batch: 8}")[0].key);
}

TEST(Planner, RepeatsOfARunThatEvaluatesTakeNewSeeds) {
  EXPECT_EQ(static_cast<long long>(train::TrainOptions{}.run.seed), kDefaultSeed);  // train's --seed default
  const auto tta = plan("parameters: {model: tinycnn, batch: 8, target-accuracy: 90, repeats: 3}");
  EXPECT_EQ(repeat_params(tta[0].params, 1), tta[0].params);  // repeat 1 as planned
  EXPECT_EQ(param_int(repeat_params(tta[0].params, 2), "seed"), 1042);
  EXPECT_EQ(param_int(repeat_params(tta[0].params, 3), "seed"), 2042);
  const auto seeded = plan("parameters: {model: tinycnn, batch: 8, epochs: 2, repeats: 2}\nvariables: {seed: [1, 2]}");
  EXPECT_EQ(param_int(repeat_params(seeded[0].params, 2), "seed"), 1001);
  EXPECT_EQ(param_int(repeat_params(seeded[1].params, 2), "seed"), 1002);
  const std::vector<std::string> argv = build_command(repeat_params(seeded[1].params, 2), "dl", "r.json");
  const std::vector<std::string> flag = {"--seed", "1002"};
  EXPECT_NE(std::search(argv.begin(), argv.end(), flag.begin(), flag.end()), argv.end());
  // Throughput runs and external tools repeat exactly: their repeats measure timing noise.
  const auto throughput = plan("parameters: {model: lenet, batch: 8, repeats: 3}");
  EXPECT_EQ(repeat_params(throughput[0].params, 3), throughput[0].params);
  const auto ext = plan("parameters: {kind: external, command: 'x', batch: 8, epochs: 2, repeats: 2}");
  EXPECT_EQ(repeat_params(ext[0].params, 2), ext[0].params);
}

TEST(Planner, BuildsTrainAndExternalCommands) {
  const auto runs = plan(R"Y(
parameters: {model: lenet, batch: 64, aux-logits: true, bind-cores: false, _note: x, repeats: 2}
variables: {scaling: [weak, strong], workers: [2]}
)Y");
  EXPECT_EQ(build_command(runs[0].params, "/bin/dlscale", "r.json"),
            (std::vector<std::string>{"/bin/dlscale", "train", "--aux-logits", "--model", "lenet", "--batch", "64",
                                      "--workers", "2", "--json", "r.json"}));
  EXPECT_EQ(build_command(runs[1].params, "/bin/dlscale", "r.json"),
            (std::vector<std::string>{"/bin/dlscale", "train", "--aux-logits", "--model", "lenet", "--global-batch",
                                      "64", "--workers", "2", "--json", "r.json"}));
  const auto timed = plan("parameters: {model: lenet, batch: 8, timeout: 100, train-timeout: 30}");
  EXPECT_EQ(build_command(timed[0].params, "dl", "r.json"),
            (std::vector<std::string>{"dl", "train", "--model", "lenet", "--batch", "8", "--timeout", "30", "--workers",
                                      "1", "--json", "r.json"}));
  const auto mpi = plan("parameters: {model: lenet, batch: 8, workers: 4, launcher: mpirun, launcher-args: "
                        "'--oversubscribe --bind-to none'}");
  EXPECT_EQ(build_command(mpi[0].params, "dl", "r.json"),
            (std::vector<std::string>{"mpirun", "-np", "4", "--oversubscribe", "--bind-to", "none", "dl", "train",
                                      "--model", "lenet", "--batch", "8", "--json", "r.json"}));
  const auto srun = plan("parameters: {model: lenet, batch: 8, workers: 8, launcher: srun, launcher-args: '-N 2'}");
  EXPECT_EQ(build_command(srun[0].params, "dl", "r.json"),
            (std::vector<std::string>{"srun", "-n", "8", "-N", "2", "dl", "train", "--model", "lenet", "--batch", "8",
                                      "--json", "r.json"}));
  const auto ext = plan(R"Y(
parameters:
  kind: external
  batch: 32
  model: resnet18
  command: "python3 peer.py --model ${model} --batch ${batch} --note 'a b' --steps $( ${batch} * 2 )"
variables: {scaling: [strong], workers: [2]}
)Y");
  EXPECT_EQ(build_command(ext[0].params, "dl", "r.json"),
            (std::vector<std::string>{"python3", "peer.py", "--model", "resnet18", "--batch", "16", "--note", "a b",
                                      "--steps", "32"}));
}

// kind commbench: no batch, options checked against commbench's own, and
// the command runs `dlscale commbench`.
TEST(Planner, CommbenchRuns) {
  const std::string yaml = R"Y(
parameters: {kind: commbench, op: allreduce, max-bytes: 1M, timeout: 60, train-timeout: 20}
variables: {workers: [2, 4]}
)Y";
  const auto runs = plan_sweep(parse_sweep(yaml, "t.yaml"), {{}, {"op", "max-bytes", "timeout"}});
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(text(runs[0], "batch"), "<unset>");
  EXPECT_EQ(build_command(runs[1].params, "dl", "r.json"),
            (std::vector<std::string>{"dl", "commbench", "--max-bytes", "1M", "--op", "allreduce", "--timeout",
                                      "20", "--workers", "4", "--json", "r.json"}));
  try {
    plan_sweep(parse_sweep("parameters: {kind: commbench, opp: tree}", "t.yaml"), {{}, {"op"}});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "parameter 'opp' is not a 'dlscale commbench' option (see 'dlscale commbench --help'; names "
              "starting with '_' are free for your own values)");
  }
  EXPECT_EQ(plan_error("parameters: {kind: commbench, batch: 8}"),
            "parameter 'batch' is set but kind is commbench, which has no batch");
}

TEST(Planner, SplitCommandQuotes) {
  EXPECT_EQ(split_command(R"(a "b c" 'd "e"' f\ g "h\"i")"),
            (std::vector<std::string>{"a", "b c", "d \"e\"", "f g", "h\"i"}));
  EXPECT_THROW(split_command("a 'b"), Error);
}

/// The lines of print_plan's table of `yaml`'s runs.
std::vector<std::string> plan_lines(const std::string& yaml) {
  std::ostringstream out;
  print_plan(out, plan(yaml));
  std::vector<std::string> lines;
  std::istringstream in(out.str());
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(Planner, DryRunTableShowsVaryingColumnsAndSkips) {
  const auto lines = plan_lines(R"Y(
parameters: {model: lenet, batch: 6}
variables: {scaling: [strong], workers: [1, 4]}
)Y");
  ASSERT_EQ(lines.size(), 5u) << ::testing::PrintToString(lines);
  EXPECT_EQ(lines[0], "#  kind     model  scaling  workers  batch  global-batch  repeats  note");
  EXPECT_EQ(lines[1], std::string(lines[3].size(), '-'));
  EXPECT_EQ(lines[2], "1  dlscale  lenet  strong   1        6      6                   1");
  EXPECT_EQ(lines[3], "2  dlscale  lenet  strong   4        1.5    6                   1  skip: strong scaling: global "
                      "batch 6 is not divisible by 4 workers");
  EXPECT_EQ(lines[4], "2 run(s) planned, 1 to run, 1 skipped");
}

TEST(Planner, DryRunTableShowsRepeatsOnceWhenAnExtensionSetsThem) {
  const auto lines = plan_lines(R"Y(
parameters: {model: lenet, batch: 6}
variables: {workers: [1, 2]}
extensions:
  - when: {workers: 2}
    set: {repeats: 3}
)Y");
  ASSERT_EQ(lines.size(), 5u) << ::testing::PrintToString(lines);
  EXPECT_EQ(lines[0], "#  kind     model  scaling  workers  batch  global-batch  repeats  note");
  EXPECT_EQ(lines[2], "1  dlscale  lenet  weak     1        6      6                   1");
  EXPECT_EQ(lines[3], "2  dlscale  lenet  weak     2        6      12                  3");
}

TEST(Planner, SlurmRunsTakeNodesAndTasksAndTheSameFileRunsLocally) {
  const std::string yaml = "parameters: {launcher: slurm, hosts: 2, workers-per-host: 2, model: lenet, batch: 8}";
  const auto runs = plan(yaml, {"model", "workers-per-host"});
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(text(runs[0], "workers"), "4");
  EXPECT_EQ(text(runs[0], "global-batch"), "32");
  EXPECT_EQ(text(runs[0], "max-jobs"), "4");
  // srun takes nodes and tasks from the batch job's allocation.
  EXPECT_EQ(build_command(runs[0].params, "/bin/dlscale", "r.json"),
            (std::vector<std::string>{"srun", "/bin/dlscale", "train", "--model", "lenet", "--batch", "8", "--json",
                                      "r.json"}));
  // launcher local: the same 4 workers, on this machine.
  const auto local = plan("parameters: {launcher: local, hosts: 2, workers-per-host: 2, model: lenet, batch: 8}",
                          {"model", "workers-per-host"});
  EXPECT_EQ(text(local[0], "workers"), "4");
  EXPECT_EQ(build_command(local[0].params, "/bin/dlscale", "r.json"),
            (std::vector<std::string>{"/bin/dlscale", "train", "--model", "lenet", "--batch", "8", "--workers", "4",
                                      "--json", "r.json"}));
  EXPECT_EQ(text(plan("parameters: {launcher: slurm, workers: 3, batch: 8, max-jobs: 9}")[0], "hosts"), "<unset>");
  EXPECT_EQ(plan_error("parameters: {launcher: slurm, workers-per-host: 2, batch: 8}"),
            "parameter 'workers-per-host' needs 'hosts' (the nodes) with launcher slurm");
  EXPECT_EQ(plan_error("parameters: {launcher: slurm, hosts: 2, workers-per-host: 2, workers: 3, batch: 8}"),
            "parameter 'workers' is 3 but hosts x workers-per-host = 4: drop 'workers'");
  EXPECT_EQ(plan_error("parameters: {launcher: slurm, link-mbit: 100, batch: 8}"),
            "parameter 'link-mbit' is for launcher cluster, not slurm");
  EXPECT_NE(plan_error("parameters: {launcher: slurm, max-jobs: 0, batch: 8}").find("max-jobs"), std::string::npos);
  EXPECT_NE(plan_error("parameters: {launcher: slrum, batch: 8}").find("slurm"), std::string::npos);
}

}  // namespace
}  // namespace dlscale::sweep
