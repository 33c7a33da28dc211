#pragma once
// Runs the real dlscale binary (or mpirun) for end-to-end tests.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "core/files.h"

namespace dlscale::testing {

struct Outcome {
  int code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

/// A unique path in the temp directory (not created).
inline std::string temp_path(const std::string& name) {
  static int counter = 0;
  return std::filesystem::temp_directory_path().string() + "/dlscale_test_" +
         std::to_string(::getpid()) + "_" + std::to_string(counter++) + "_" + name;
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

}  // namespace dlscale::testing
