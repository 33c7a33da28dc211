#pragma once
// A quality metric a task evaluates (top-1, top-5 today; hit rate, token
// accuracy, mean average precision later), LibTorch-free so that records,
// checkpoints and the console can name and format it.
#include <string>

namespace dlscale {

struct MetricSpec {
  std::string name;               ///< record key, e.g. "top1" (evals[].top1, final_top1)
  std::string label;              ///< console text, e.g. "top-1"
  bool percent = true;            ///< a fraction shown as a percentage; else a plain number
  bool higher_is_better = true;   ///< the direction a target is reached in
};

}  // namespace dlscale
