// The launcher recipe of docs/architecture.md ("Launchers": a new external
// launcher is a detection rule), followed by a test: "toyrun", a launcher
// written here, tells each rank its place in TOYRUN_* variables. Registered
// (register_launch_rule: the rule the recipe adds to launch_env.cpp's table,
// at run time), it is recognised like mpirun or srun, and a job of two ranks
// it started (forks of this process, which has the rule) trains as one
// worker does, with no file of src/ naming it.
#include <fcntl.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <mutex>

#include "comm/tcp_store.h"
#include "core/child_process.h"
#include "launch/launch_env.h"
#include "launch/weights_util.h"
#include "process_util.h"

namespace dlscale::launch {
namespace {

void register_toyrun() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_launch_rule({"toyrun", [](const EnvLookup& env, LaunchEnv& e) {
                            const char* rank = env("TOYRUN_RANK");
                            if (rank == nullptr) return false;
                            e.rank = std::atoi(rank);
                            e.world_size = std::atoi(env("TOYRUN_SIZE"));
                            e.local_rank = e.rank;
                            e.local_world_size = e.world_size;
                            e.master_addr = "127.0.0.1";
                            e.master_port = std::atoi(env("TOYRUN_PORT"));
                            return true;
                          }});
  });
}

const std::string kSeamLenet =
    "train --model lenet --dropout 0 --threads 1 --steps 3 --warmup 1 --optimizer momentum --lr "
    "0.05 "
    "--synthetic-batches 2 --display-every 0 --global-batch 12";

/// One rank of the toyrun job, a fork of this process; its stderr goes to `err`.
ChildProcess start_rank(int rank, uint16_t port, const std::string& weights,
                        const std::string& err) {
  auto words = testing::shell_words(kSeamLenet + (rank == 0 ? " --save-weights " + weights : ""));
  words->insert(words->begin(), DLSCALE_BINARY);
  SpawnOptions s;
  s.argv = *words;
  s.program = s.argv[0];
  s.run = testing::forked_entry().run;
  s.set_env = {{"TOYRUN_RANK", std::to_string(rank)},
               {"TOYRUN_SIZE", "2"},
               {"TOYRUN_PORT", std::to_string(port)}};
  const int fd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  s.stderr_fd = fd;
  s.stdout_fd = SpawnOptions::kDevNull;
  ChildProcess child(s);
  ::close(fd);
  return child;
}

/// toyrun's variables for rank `rank` of a world of 3 that meets at port 29500.
EnvLookup toyrun_env(const char* rank) {
  return [rank](const char* name) -> const char* {
    const std::string n = name;
    return n == "TOYRUN_RANK"   ? rank
           : n == "TOYRUN_SIZE" ? "3"
           : n == "TOYRUN_PORT" ? "29500"
                                : nullptr;
  };
}

TEST(LaunchRuleSeam, ARegisteredLauncherIsRecognisedAndNamed) {
  register_toyrun();
  const LaunchEnv e = detect_launch_env(toyrun_env("1"));
  EXPECT_EQ(e.kind, LaunchKind::kExternal);
  EXPECT_EQ(e.launcher, "toyrun");
  EXPECT_EQ(e.rank, 1);
  EXPECT_EQ(e.world_size, 3);
  EXPECT_EQ(e.master_port, 29500);
  EXPECT_EQ(detect_launch_env([](const char*) -> const char* { return nullptr; }).launcher,
            "standalone");
  EXPECT_EQ(testing::error_of([] { detect_launch_env(toyrun_env("3")); }),
            "launch environment (toyrun) gives rank 3 outside world size 3");
  EXPECT_EQ(testing::error_of([] {
              register_launch_rule({"mpirun", [](const EnvLookup&, LaunchEnv&) { return false; }});
            }),
            "launch rule 'mpirun' is taken");
}

TEST(LaunchRuleSeam, AJobItStartsTrainsAsOneWorker) {
  register_toyrun();
  ASSERT_NE(testing::forked_entry().run, nullptr);
  ASSERT_TRUE(testing::forked_entry().can_fork())
      << "this process has threads a fork would lack, and only this process has the toyrun rule";
  const testing::TrainRun one = [] {
    const std::string w = testing::temp_path("w1.pt");
    auto words = testing::shell_words(kSeamLenet + " --save-weights " + w);
    words->insert(words->begin(), DLSCALE_BINARY);
    const testing::Outcome o = testing::run_forked(*words);
    EXPECT_EQ(o.code, 0) << o.err;
    testing::TrainRun r;
    if (o.code == 0) r.weights = testing::load_weights(w);
    return r;
  }();
  uint16_t port = 0;
  {
    comm::TcpStoreServer probe("127.0.0.1", 0);  // a free port, released for the job
    port = probe.port();
  }
  const std::string w = testing::temp_path("w2.pt");
  const std::string err0 = testing::temp_path("err0");
  const std::string err1 = testing::temp_path("err1");
  ChildProcess rank1 = start_rank(1, port, w, err1);
  ChildProcess rank0 = start_rank(0, port, w, err0);
  rank0.wait();
  rank1.wait();
  const std::string log0 = read_file(err0);
  ASSERT_EQ(rank0.exit_code(), 0) << log0;
  ASSERT_EQ(rank1.exit_code(), 0) << read_file(err1);
  EXPECT_NE(log0.find("2 workers connected via gloo (toyrun)"), std::string::npos) << log0;
  ASSERT_FALSE(one.weights.empty());
  EXPECT_LE(testing::closeness(testing::load_weights(w), one.weights, 1e-5, 1e-6), 1.0);
  std::filesystem::remove(err0);
  std::filesystem::remove(err1);
}

}  // namespace
}  // namespace dlscale::launch
