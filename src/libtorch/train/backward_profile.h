#pragma once
// When backward produces each gradient: the calibration `dlscale predict
// --calibrate` reads (docs/predict.md). A hook on every parameter notes the
// time its gradient arrives, measured from the start of backward; the
// record holds each tensor's median over the measured steps.
#include <torch/torch.h>

#include <nlohmann/json.hpp>
#include <vector>

namespace dlscale::train {

class BackwardProfiler {
 public:
  /// Hooks every tensor of `params` (registration order); the hooks are
  /// removed on destruction.
  explicit BackwardProfiler(std::vector<torch::Tensor> params);
  ~BackwardProfiler();
  BackwardProfiler(const BackwardProfiler&) = delete;
  BackwardProfiler& operator=(const BackwardProfiler&) = delete;

  /// Backward starts at `now` (monotonic seconds).
  void begin(double now);
  /// Backward ended at `now`; a measured step's times are kept.
  void end(double now, bool measured);
  /// {"backward_ms": median, "steps": n, "tensors": [{"bytes", "ready_ms"}]}
  /// in registration order (ready_ms: the median over the measured steps;
  /// a tensor backward never reached reads as the whole backward); null
  /// before any measured step.
  nlohmann::json to_json() const;

 private:
  std::vector<torch::Tensor> params_;
  std::vector<unsigned> hooks_;
  double start_ = 0;
  std::vector<double> current_;               // this step's ready times; < 0 = not yet
  std::vector<std::vector<double>> ready_;    // per tensor, per measured step
  std::vector<double> backward_;              // per measured step
};

}  // namespace dlscale::train
