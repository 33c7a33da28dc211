// The one child-process type (core/child_process.h): exit codes and
// signals, stopping with grace, what a child inherits, and no orphan or
// zombie left behind whatever happens to its owner.
#include "core/child_process.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <thread>

#include "../process_util.h"
#include "core/clock.h"
#include "core/files.h"

namespace dlscale {
namespace {

SpawnOptions shell(const std::string& script) {
  SpawnOptions o;
  o.argv = {"sh", "-c", script};
  return o;
}

bool alive(pid_t pid) { return ::kill(pid, 0) == 0; }

TEST(ChildProcess, ExitCodesSignalsAndDescriptions) {
  ChildProcess ok(shell("exit 0"));
  ok.wait();
  EXPECT_FALSE(ok.failed());
  EXPECT_EQ(ok.describe_exit(), "exited with code 0");
  ChildProcess three(shell("exit 3"));
  three.wait();
  EXPECT_EQ(three.exit_code(), 3);
  EXPECT_TRUE(three.failed());
  ChildProcess killed(shell("kill -9 $$"));
  killed.wait();
  EXPECT_EQ(killed.term_signal(), SIGKILL);
  EXPECT_EQ(killed.describe_exit(), "was killed by signal 9 (SIGKILL)");
  EXPECT_FALSE(ChildProcess().running());
  EXPECT_TRUE(ChildProcess().poll());  // never started: nothing to wait for
}

TEST(ChildProcess, ExecFailureIsExit127WithItsReason) {
  const std::string log = testing::temp_path("exec.log");
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  SpawnOptions o;
  o.argv = {"dlscale-no-such-program"};
  o.stderr_fd = fd;
  o.error_prefix = "dlscale: error: ";
  ChildProcess c(o);
  ::close(fd);
  c.wait();
  EXPECT_EQ(c.exit_code(), kExitExecFailed);
  EXPECT_EQ(read_file(log),
            "dlscale: error: cannot run 'dlscale-no-such-program': No such file or directory\n");
  std::filesystem::remove(log);
}

TEST(ChildProcess, EnvironmentDescriptorsAndTheEnterHook) {
  const std::string out = testing::temp_path("env.out");
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  SpawnOptions o = shell("echo \"$DLSCALE_TEST_VAR\" >" + out + "; echo via-fd >&5");
  o.set_env = {{"DLSCALE_TEST_VAR", "set"}};
  o.pass_fds = {{fds[1], 5}};
  ChildProcess c(o);
  ::close(fds[1]);
  char buf[16] = {};
  EXPECT_EQ(::read(fds[0], buf, sizeof(buf) - 1), 7);
  ::close(fds[0]);
  c.wait();
  EXPECT_EQ(std::string(buf), "via-fd\n");
  EXPECT_EQ(read_file(out), "set\n");
  std::filesystem::remove(out);
  // A hook that fails stops the child before exec, saying what failed.
  SpawnOptions refused = shell("exit 0");
  refused.enter = [](const char** what) {
    *what = "enter the test";
    return EPERM;
  };
  ChildProcess r(refused);
  r.wait();
  EXPECT_EQ(r.exit_code(), 2);
}

// A forked child's entry (SpawnOptions::run): which of its checks failed is
// its exit code; 7 when all held.
int forked_entry(int argc, char** argv) {
  if (argc != 4 || std::string(argv[1]) != "hello") return 10;
  const char* var = std::getenv("DLSCALE_TEST_VAR");
  if (var == nullptr || std::string(var) != "set") return 11;
  if (::fcntl(std::atoi(argv[2]), F_GETFD) != -1)
    return 12;  // close-on-exec: closed, as exec closes it
  if (::fcntl(std::atoi(argv[3]), F_GETFD) == -1) return 13;  // kept, as exec keeps it
  if (::write(20, "via-fd\n", 7) != 7) return 14;
  return 7;
}

int throwing_entry(int, char**) { throw std::runtime_error("escaped"); }

TEST(ChildProcess, RunInsteadOfExecGetsArgvEnvironmentAndTheDescriptorsExecWouldKeep) {
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  const int closed = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  const int kept = ::open("/dev/null", O_RDONLY);
  SpawnOptions o;
  o.argv = {"self", "hello", std::to_string(closed), std::to_string(kept)};
  o.run = forked_entry;
  o.set_env = {{"DLSCALE_TEST_VAR", "set"}};
  o.pass_fds = {{fds[1], 20}};  // above the others
  ChildProcess c(o);
  ::close(fds[1]);
  char buf[16] = {};
  EXPECT_EQ(::read(fds[0], buf, sizeof(buf) - 1), 7);
  c.wait();
  EXPECT_EQ(c.exit_code(), 7);
  EXPECT_EQ(std::string(buf), "via-fd\n");
  EXPECT_EQ(std::getenv("DLSCALE_TEST_VAR"), nullptr);  // this process's environment is its own
  for (const int fd : {fds[0], closed, kept}) ::close(fd);
  SpawnOptions thrown;
  thrown.argv = {"self"};
  thrown.run = throwing_entry;
  thrown.stderr_fd = SpawnOptions::kDevNull;
  ChildProcess t(thrown);
  t.wait();
  EXPECT_EQ(t.exit_code(), 1);
}

TEST(ChildProcess, TerminateGivesGraceThenKillsAndReachesTheGroup) {
  // SIGTERM ends a cooperative child at once.
  ChildProcess sleeper(shell("exec sleep 30"));
  const double start = now_seconds();
  sleeper.terminate(5.0);
  EXPECT_LT(now_seconds() - start, 3.0);
  EXPECT_EQ(sleeper.term_signal(), SIGTERM);
  // A stopped child is continued, so that it ends by the SIGTERM, not by the
  // SIGKILL after the grace; the same with its own group.
  for (const bool group : {false, true}) {
    SpawnOptions so = shell("exec sleep 30");
    so.own_group = group;
    ChildProcess stopped(so);
    ASSERT_EQ(::kill(stopped.pid(), SIGSTOP), 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    stopped.terminate(20.0);
    EXPECT_EQ(stopped.term_signal(), SIGTERM) << (group ? "own group" : "no group of its own");
  }
  // One that ignores SIGTERM is killed after the grace. (Its sleeps are
  // short: an orphaned `sleep 30` would hold ctest's output pipe open, and
  // ctest waits for it, 30 s.)
  ChildProcess stubborn(shell("trap '' TERM; while :; do sleep 0.05; done"));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  stubborn.terminate(0.3);
  EXPECT_EQ(stubborn.term_signal(), SIGKILL);
  // With its own group, what it started goes too.
  const std::string pid_file = testing::temp_path("grandchild.pid");
  SpawnOptions o = shell("sleep 30 & echo $! >" + pid_file + "; wait");
  o.own_group = true;
  ChildProcess parent(o);
  pid_t grandchild = 0;
  for (int i = 0; i < 100 && grandchild == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (std::filesystem::exists(pid_file)) grandchild = std::atoi(read_file(pid_file).c_str());
  }
  ASSERT_GT(grandchild, 0);
  parent.terminate(2.0);
  for (int i = 0; i < 100 && alive(grandchild); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(alive(grandchild));
  std::filesystem::remove(pid_file);
}

TEST(ChildProcess, ADestroyedOwnerLeavesNoProcess) {
  pid_t pid = 0;
  {
    ChildProcess c(shell("exec sleep 30"));
    pid = c.pid();
    EXPECT_TRUE(alive(pid));
    ChildProcess moved = std::move(c);  // ownership moves; one owner kills it
    EXPECT_FALSE(c.running());
    EXPECT_TRUE(moved.running());
  }
  EXPECT_FALSE(alive(pid));  // killed and reaped: not even a zombie
}

}  // namespace
}  // namespace dlscale
