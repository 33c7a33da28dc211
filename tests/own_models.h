#pragma once
// The TorchScript modules of the tests, exported at test time by
// examples/own-model/export.py (Debian's python3-torch and -torchvision):
// once per test binary, into a temporary directory removed at its exit.
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
    x.dir = temp_path("own-models");
    const auto o = run_shell(std::string("/usr/bin/python3 ") + DLSCALE_SOURCE_DIR +
                             "/examples/own-model/export.py " + x.dir +
                             " resnet18 resnet18-10 small-cnn encoder translator recommender "
                             "mnist-mlp two-inputs raises no-params 2>&1");
    EXPECT_EQ(o.code, 0) << o.out << o.err;
    std::istringstream lines(o.out);
    for (std::string line; std::getline(lines, line);) {
      std::istringstream words(line);
      std::string path, count;
      if (words >> path >> count && path.size() > 3 &&
          path.compare(path.size() - 3, 3, ".pt") == 0) {
        x.pytorch_parameters[std::filesystem::path(path).stem().string()] = std::stoll(count);
      }
    }
    return x;
  }();
  // The modules (about 100 MB) leave with the test binary.
  struct RemoveAtExit {
    std::string dir;
    ~RemoveAtExit() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  };
  static const RemoveAtExit cleanup{e.dir};
  return e;
}

/// Writes `text` into a new file named after `name` beside the modules
/// (removed with them) and returns its path: the tests' task files.
inline std::string own_file(const std::string& name, const std::string& text) {
  static int counter = 0;
  const std::string path = own_models().dir + "/" + std::to_string(counter++) + "_" + name;
  write_file_atomic(path, text);
  return path;
}

/// The path of exported module `name` ("small-cnn").
inline std::string own_model(const std::string& name) {
  return own_models().dir + "/" + name + ".pt";
}

}  // namespace dlscale::testing
