#pragma once
// Runs the real dlscale binary (or mpirun) for end-to-end tests.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/child_process.h"
#include "core/error.h"
#include "core/files.h"
#include "core/subprocess.h"

namespace dlscale::testing {

/// Whether this build has the MPI backend: tests/CMakeLists.txt defines
/// DLSCALE_WITH_MPI for every test (a test binary without it does not compile).
inline constexpr bool kWithMpi = DLSCALE_WITH_MPI;

/// Whether tests that need root (namespaces, mounts) must run rather than
/// skip: .ci/run sets DLSCALE_REQUIRE_ROOT_TESTS=1 when it runs as root, so a
/// drill that cannot start there fails instead of passing as skipped.
inline bool root_tests_required() {
  const char* v = std::getenv("DLSCALE_REQUIRE_ROOT_TESTS");
  return v != nullptr && *v != '\0' && std::string(v) != "0";
}

/// Skips the test, saying `why`, when `why` is not empty; fails it instead
/// when root tests are required (root_tests_required()).
#define DLSCALE_SKIP_UNLESS_ABLE(why)                                                              \
  if (const std::string why_not_ = (why); !why_not_.empty()) {                                      \
    if (::dlscale::testing::root_tests_required()) {                                                \
      FAIL() << "cannot run, and DLSCALE_REQUIRE_ROOT_TESTS is set: " << why_not_;                 \
    }                                                                                               \
    GTEST_SKIP() << why_not_;                                                                       \
  }

/// Skips a test that runs under mpirun in a build without the MPI backend.
#define DLSCALE_SKIP_WITHOUT_MPI()            \
  if (!::dlscale::testing::kWithMpi)           \
  GTEST_SKIP() << "built without the MPI backend (-DDLSCALE_WITH_MPI=OFF)"

struct Outcome {
  int code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

/// This process's scratch directory in the temp directory, created on first
/// use and removed with everything in it when the process exits, so that a
/// test run leaves nothing behind in /tmp. The pid alone does not name it:
/// pids are reused, and a directory an earlier process left behind (killed
/// by a timeout) would be taken for this one's; a random token drawn once per
/// process does. A child forked from the process (run_dlscale, local
/// workers) leaves without static destructors, and would not remove it
/// anyway: only the process that made it does.
inline const std::string& scratch_dir() {
  struct Dir {
    pid_t owner = ::getpid();
    std::string path;
    Dir() {
      std::random_device device;
      path =
          (std::filesystem::temp_directory_path() /
           ("dlscale_test_" + std::to_string(owner) + "_" + std::to_string(device() % 1000000000U)))
              .string();
      std::filesystem::create_directories(path);
    }
    ~Dir() {
      if (::getpid() == owner) dlscale::remove_tree(path);
    }
  };
  static const Dir dir;
  return dir.path;
}

/// A unique path in this process's scratch directory (not created).
inline std::string temp_path(const std::string& name) {
  static int counter = 0;
  return scratch_dir() + "/" + std::to_string(counter++) + "_" + name;
}

/// Runs `command` through the shell; captures stdout, stderr and exit code.
inline Outcome run_shell(const std::string& command) {
  const std::string err_path = temp_path("stderr");
  const std::string cmd = command + " 2>" + err_path;
  Outcome o;
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (pipe == nullptr) return o;
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) o.out.append(buf.data(), n);
  const int status = ::pclose(pipe);
  o.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  o.err = read_file(err_path);
  std::filesystem::remove(err_path);
  return o;
}

/// dlscale-torch's entry, where this test binary has it (dlscale_tests:
/// tests/launch/forked_runs.cpp registers it): run_dlscale then runs a
/// command in a fork of this process, which has LibTorch loaded already,
/// instead of executing the binary, which loads it again (about 1 s of CPU a
/// run, most of ctest's time). `can_fork` says whether this process may fork
/// now (no other thread: an OpenMP pool would not survive it).
struct ForkedEntry {
  int (*run)(int argc, char** argv) = nullptr;
  bool (*can_fork)() = nullptr;
};
inline ForkedEntry& forked_entry() {
  static ForkedEntry entry;
  return entry;
}

/// How many commands run_forked has run in this process.
inline int& forked_runs() {
  static int runs = 0;
  return runs;
}

/// `args` split into words as the shell would, when they are plain words,
/// quotes ('…', and "…" holding none of $ ` \) and escaped characters;
/// nullopt when they use anything else of the shell (redirections, pipes,
/// variables, globs…).
inline std::optional<std::vector<std::string>> shell_words(const std::string& args) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const char c = args[i];
    if (c == ' ' || c == '\t') {
      if (in_word) words.push_back(word);
      word.clear();
      in_word = false;
      continue;
    }
    in_word = true;
    if (c == '\'' || c == '"') {
      const size_t end = args.find(c, i + 1);
      if (end == std::string::npos) return std::nullopt;
      const std::string quoted = args.substr(i + 1, end - i - 1);
      if (c == '"' && quoted.find_first_of("$`\\") != std::string::npos) return std::nullopt;
      word += quoted;
      i = end;
    } else if (c == '\\' && i + 1 < args.size() && args[i + 1] != '\n') {
      word += args[++i];
    } else if (std::string("|&;<>()$`*?[]{}~#!\n\\").find(c) != std::string::npos) {
      return std::nullopt;
    } else {
      word += c;
    }
  }
  if (in_word) words.push_back(word);
  return words;
}

/// Runs `argv` (argv[0] included) in a fork of this process through
/// forked_entry(), as the shell would run the binary: stdin inherited,
/// stdout captured, stderr captured through a file.
inline Outcome run_forked(const std::vector<std::string>& argv) {
  const std::string err_path = temp_path("stderr");
  const int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (err < 0) return {-1, "", "cannot create " + err_path};
  SpawnOptions spawn;
  spawn.argv = argv;
  spawn.program = argv.at(0);
  spawn.run = forked_entry().run;
  spawn.stdin_fd = SpawnOptions::kInherit;
  spawn.stderr_fd = err;
  spawn.die_with_parent = false;  // as a shell's child
  Outcome o;
  ChildProcess child;
  try {
    child = run_reading_output(spawn, false, &o.out);
  } catch (...) {
    ::close(err);
    throw;
  }
  ::close(err);
  ++forked_runs();
  o.code = child.term_signal() != 0 ? -1 : child.exit_code();
  o.err = read_file(err_path);
  std::filesystem::remove(err_path);
  return o;
}

/// Runs dlscale with `args` (a shell-quoted string): in a fork of this
/// process where it can (forked_entry(); plain words), else through the
/// shell. DLSCALE_TEST_EXEC=1 executes the binary always.
inline Outcome run_dlscale(const std::string& args) {
  const ForkedEntry& entry = forked_entry();
  const char* exec = std::getenv("DLSCALE_TEST_EXEC");
  const bool fork = entry.run != nullptr && (exec == nullptr || std::string(exec) != "1");
  if (fork && entry.can_fork()) {
    if (auto words = shell_words(args)) {
      words->insert(words->begin(), DLSCALE_BINARY);
      return run_forked(*words);
    }
  }
  return run_shell(std::string(DLSCALE_BINARY) + " " + args);
}

/// The one-line error of `args`, which must fail with exit code 2.
inline std::string fails(const std::string& args) {
  const auto o = run_dlscale(args);
  EXPECT_EQ(o.code, 2) << args << "\n" << o.out << o.err;
  return o.err;
}

/// What `f` throws as dlscale::Error; "" when it returns.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace dlscale::testing
