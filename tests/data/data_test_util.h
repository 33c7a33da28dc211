#pragma once
// Helpers for the data-format tests: a temporary directory removed at the
// end of the test, whole-file reads and writes, and a shell command's output.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "core/error.h"
#include "core/files.h"

namespace dlscale::testing {

/// A fresh directory under ::testing::TempDir(), removed with its contents.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = ::testing::TempDir() + "dlscale_data_XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed: " + tmpl);
    path_ = tmpl;
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() { dlscale::remove_tree(path_); }
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path);
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

/// Runs `command` with /bin/sh; returns its stdout; `status` gets the exit
/// code (-1 when it did not exit normally).
inline std::string shell_output(const std::string& command, int& status) {
  std::string out;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) {
    status = -1;
    return out;
  }
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
  const int raw = ::pclose(pipe);
  status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return out;
}

/// Whether `text` contains `part`; the failure message shows both.
inline ::testing::AssertionResult contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << text << "' does not contain '" << part << "'";
}

/// Runs `fn`, which must throw dlscale::Error; returns the message ("" and a
/// test failure when it does not throw).
template <typename Fn>
std::string error_message(Fn&& fn) {
  try {
    fn();
  } catch (const dlscale::Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected dlscale::Error";
  return "";
}

}  // namespace dlscale::testing
