#pragma once
// Final weights saved by `dlscale train --save-weights`, for the
// equivalence tests.
#include <torch/torch.h>

#include <filesystem>
#include <string>
#include <vector>

namespace dlscale::testing {

/// Loads the parameter list saved at `path`, then removes the file.
inline std::vector<torch::Tensor> load_weights(const std::string& path) {
  std::vector<torch::Tensor> w;
  torch::load(w, path);
  std::filesystem::remove(path);
  return w;
}

}  // namespace dlscale::testing
