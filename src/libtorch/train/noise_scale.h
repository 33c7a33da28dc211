#pragma once
// --noise-scale on one worker (docs/convergence.md, "Gradient noise
// scale"): a hook on every parameter notes the squared norm of the gradient
// each backward pass produces, before the strategy exchanges it; after the
// exchange the step's small- and large-batch norms feed the estimator
// (train/noise_estimator.h).
//  - several workers: the small batch is a worker's step (batch x
//    --accumulate samples: its last backward pass carries the sum), the
//    large one the workers' average;
//  - one worker with --accumulate K >= 2: the small batch is a micro-batch
//    (passes 1 .. K-1), the large one the step.
// Only every `every`-th step is measured (--noise-every); on the others the
// hooks return at once and nothing is exchanged.
// With Adam, the same two batch sizes also give the noise scale of Adam's
// preconditioned gradient, P g with P = 1 / (sqrt(v) + eps) element by
// element: tr(P Sigma P) / |P G|^2 (docs/convergence.md, "The noise scale
// Adam sees"), from the optimizer's state at the start of the step.
#include <torch/torch.h>

#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "libtorch/dp/gradient_sync.h"
#include "train/noise_estimator.h"

namespace dlscale::train {

/// sum(w g^2) over `grads` and their `weights` (one each; an undefined
/// gradient or weight is skipped), in float64; a sparse gradient's rows take
/// their rows of its weight.
double weighted_sq_sum(const std::vector<torch::Tensor>& grads,
                       const std::vector<torch::Tensor>& weights);

class NoiseProbe {
 public:
  NoiseProbe(std::vector<torch::Tensor> params, int workers, int64_t micro_batches,
             int64_t local_batch, int64_t every);
  ~NoiseProbe();
  NoiseProbe(const NoiseProbe&) = delete;
  NoiseProbe& operator=(const NoiseProbe&) = delete;

  /// Whether `step` is one it measures (begin_backward() .. finish_step()).
  bool measures(int64_t step) const { return dp::measures_noise(step, every_); }
  /// Before a measured step's backward: Adam's P^2 for each parameter
  /// (train/optimizer.h: adam_preconditioner_squares), or none (empty).
  void set_preconditioner(std::vector<torch::Tensor> squares);
  /// After the exchange, with a preconditioner set: sum of P^2 g^2 over
  /// `params`' gradients (the averaged ones); NaN without one.
  double averaged_weighted_sq(const std::vector<torch::Tensor>& params) const;
  /// Around micro-batch `m`'s backward; `loss_scale` multiplies its
  /// gradients (--amp fp16), and each micro-batch's loss counts 1/K.
  void begin_backward(int64_t micro_batch, double loss_scale);
  void end_backward();
  /// After the exchange: one step, with `averaged_sq` the averaged
  /// gradient's squared norm (`averaged_weighted_sq` its preconditioned
  /// one, NaN when not measured) and `sum_over_workers` (null for one
  /// worker) the sum of a value over the workers, called once on every
  /// worker (twice with a preconditioner).
  void finish_step(int64_t step, double averaged_sq, double averaged_weighted_sq,
                   const std::function<double(double)>& sum_over_workers);
  /// Before finish_step(), where servers hold Adam's state (ps): this
  /// worker's sum of P^2 g^2 as they took it, in place of the hooks' (which
  /// have no P^2); NaN: none yet.
  void serve_weighted(double own) {
    served_ = true;
    served_weighted_ = own;
  }
  /// A step whose gradients overflowed (--amp fp16): forgets its passes.
  void skip_step();
  /// results.noise: the estimate, its parts and its course over the steps.
  nlohmann::json report() const;
  /// The console's line.
  std::string summary() const;

 private:
  std::vector<torch::Tensor> params_;
  std::vector<unsigned> hooks_;
  const int workers_;
  const int64_t micro_batches_;
  const int64_t every_;
  /// One estimate and its course over the measured steps.
  struct Track {
    explicit Track(const NoiseEstimator& e) : estimator(e) {}
    NoiseEstimator estimator;
    std::vector<int64_t> steps;
    std::vector<double> b_simple, gradient_sq, trace_sigma;
    void add(int64_t step, double small_sq, double big_sq);
    /// steps, b_simple, gradient_sq, trace_sigma and course.
    nlohmann::json json() const;
  };
  Track plain_;                         // of the gradients
  Track preconditioned_;                // of Adam's P g
  std::mutex mu_;                       // hooks may run on autograd's threads
  std::vector<torch::Tensor> squares_;  // this pass's, while counting
  std::vector<torch::Tensor> weighted_squares_;
  std::vector<torch::Tensor> weights_;  // this step's P^2, or empty
  bool counting_ = false;
  double factor_ = 1;     // squares x this = the squares of the mean-loss gradient
  double small_sum_ = 0;  // this step's counted passes
  double small_weighted_sum_ = 0;
  int64_t small_passes_ = 0;
  bool served_ = false;  // this step's small weighted sum came from the servers
  double served_weighted_ = 0;
};

/// --noise-final: the noise scale at the final weights, from N averaged
/// gradients of the global batch taken after the last step without
/// updating (train/noise_estimator.h: fixed_weights_noise). It keeps their
/// sum, in float64, and the sum of their squared norms; with Adam's P^2
/// (`weights`, else empty) the same for P g.
class FinalNoise {
 public:
  FinalNoise(double batch, std::vector<torch::Tensor> weights)
      : batch_(batch), weights_(std::move(weights)) {}
  /// One averaged gradient: the .grad of `params` (dense or sparse; an
  /// undefined one counts as zero).
  void add(const std::vector<torch::Tensor>& params);
  /// results.noise.final: `steps`, `batch`, `gradient_sq`, `trace_sigma`,
  /// `b_simple` (null: undefined), `summary`, and under Adam `preconditioned`.
  nlohmann::json report(double seconds) const;

 private:
  double batch_;
  std::vector<torch::Tensor> weights_;      // P^2 per parameter, or empty
  std::vector<torch::Tensor> sum_;          // Σ g, float64, per parameter
  torch::Tensor sq_sum_, weighted_sq_sum_;  // Σ |g|^2 and Σ |P g|^2, 0-dim float64 (undefined: 0)
  int64_t count_ = 0;
};

}  // namespace dlscale::train
