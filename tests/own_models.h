#pragma once
// The TorchScript modules of the tests, exported by
// examples/own-model/export.py (Debian's python3-torch and -torchvision) at
// build time into the build tree (tests/CMakeLists.txt,
// DLSCALE_OWN_MODELS_DIR): read-only for the tests, which write their own
// files into a temporary directory of their own.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <sstream>
#include <string>

#include "process_util.h"

namespace dlscale::testing {

struct OwnModels {
  std::string dir;
  std::map<std::string, int64_t> pytorch_parameters;  ///< as PyTorch counts them, by model
};

inline const OwnModels& own_models() {
  static const OwnModels e = [] {
    OwnModels x;
    x.dir = DLSCALE_OWN_MODELS_DIR;
    // export.py's output: each file written and its parameter count.
    std::istringstream lines(read_file(x.dir + "/exported.txt"));
    for (std::string line; std::getline(lines, line);) {
      std::istringstream words(line);
      std::string path, count;
      if (words >> path >> count && path.size() > 3 &&
          path.compare(path.size() - 3, 3, ".pt") == 0) {
        x.pytorch_parameters[std::filesystem::path(path).stem().string()] = std::stoll(count);
      }
    }
    EXPECT_EQ(x.pytorch_parameters.size(), 10u) << "rebuild the tests: " << x.dir;
    return x;
  }();
  return e;
}

/// Writes `text` into a new file named after `name` in this process's
/// scratch directory (process_util.h) and returns its path: the tests'
/// task files and broken modules.
inline std::string own_file(const std::string& name, const std::string& text) {
  const std::string path = temp_path(name);
  write_file_atomic(path, text);
  return path;
}

/// The path of exported module `name` ("small-cnn").
inline std::string own_model(const std::string& name) {
  return own_models().dir + "/" + name + ".pt";
}

}  // namespace dlscale::testing
