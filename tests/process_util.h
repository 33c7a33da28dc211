#pragma once
// Runs the real dlscale binary (or mpirun) for end-to-end tests.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <random>
#include <string>

#include "core/error.h"
#include "core/files.h"

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

/// A unique path in the temp directory (not created). The pid alone is not
/// unique: pids are reused, and a path an earlier process left behind would
/// be taken for this one's; a random token drawn once per process is.
inline std::string temp_path(const std::string& name) {
  static int counter = 0;
  static const std::string token = [] {
    std::random_device device;
    return std::to_string(::getpid()) + "_" + std::to_string(device() % 1000000000U);
  }();
  return std::filesystem::temp_directory_path().string() + "/dlscale_test_" + token + "_" +
         std::to_string(counter++) + "_" + name;
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

/// Runs dlscale with `args` (a shell-quoted string).
inline Outcome run_dlscale(const std::string& args) {
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
