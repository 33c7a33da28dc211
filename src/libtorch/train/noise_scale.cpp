#include "libtorch/train/noise_scale.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "libtorch/dp/grad_clip.h"

namespace dlscale::train {
namespace {

/// JSON has no NaN: an undefined estimate is null.
nlohmann::json number_or_null(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json();
}

nlohmann::json numbers(const std::vector<double>& values) {
  nlohmann::json out = nlohmann::json::array();
  for (double v : values) out.push_back(number_or_null(v));
  return out;
}

/// sum(w g^2), one float32 dot product as dp::self_dot's (one temporary,
/// g^2); a sparse gradient's rows take their rows of `w`.
torch::Tensor weighted_self_dot(const torch::Tensor& grad, const torch::Tensor& w) {
  torch::NoGradGuard no_grad;
  if (!grad.is_sparse()) return at::dot(grad.square().reshape({-1}), w.reshape({-1}));
  const torch::Tensor g = grad.coalesce();
  const torch::Tensor rows = w.index_select(0, g.indices()[0]);
  return at::dot(g.values().square().reshape({-1}), rows.reshape({-1}));
}

/// sum(w x^2) in float64 for a dense float64 `x`, on its device; 0 where
/// `w` is undefined (a tensor the optimizer does not train).
torch::Tensor weighted_double_sq(const torch::Tensor& x, const torch::Tensor& w) {
  if (!w.defined()) return torch::zeros({}, x.options());
  return (x.square() * w.to(torch::kDouble)).sum();
}

/// A B_simple for the summary lines: its value, or why there is none.
std::string estimate_text(double b) {
  return std::isfinite(b) ? fmt::format("{:.4g}", b) : "undefined (|G|^2 estimate not positive)";
}

/// `sum` + `term`, where an undefined `sum` is zero.
torch::Tensor accumulated(const torch::Tensor& sum, const torch::Tensor& term) {
  return sum.defined() ? sum + term : term;
}

/// A 0-dim sum as a double; 0 while nothing was added.
double value_of(const torch::Tensor& sum) { return sum.defined() ? sum.item<double>() : 0.0; }

}  // namespace

NoiseProbe::NoiseProbe(std::vector<torch::Tensor> params, int workers, int64_t micro_batches,
                       int64_t local_batch, int64_t every)
    : params_(std::move(params)),
      workers_(workers),
      micro_batches_(micro_batches),
      every_(every),
      plain_{NoiseEstimator(workers > 1 ? static_cast<double>(local_batch * micro_batches)
                                        : static_cast<double>(local_batch),
                            static_cast<double>(local_batch * micro_batches * workers))},
      preconditioned_{plain_.estimator} {
  DLSCALE_ASSERT((workers > 1 || micro_batches > 1) && every >= 1);
  for (size_t k = 0; k < params_.size(); ++k) {
    hooks_.push_back(params_[k].register_hook([this, k](const torch::Tensor& grad) {
      if (!counting_ || !grad.defined()) return;
      torch::Tensor square = dp::self_dot(grad);
      torch::Tensor weighted;
      if (!weights_.empty() && weights_[k].defined())
        weighted = weighted_self_dot(grad, weights_[k]);
      std::lock_guard<std::mutex> lock(mu_);
      squares_.push_back(std::move(square));
      if (weighted.defined()) weighted_squares_.push_back(std::move(weighted));
    }));
  }
}

NoiseProbe::~NoiseProbe() {
  for (size_t k = 0; k < hooks_.size(); ++k) params_[k].remove_hook(hooks_[k]);
}

void NoiseProbe::set_preconditioner(std::vector<torch::Tensor> squares) {
  DLSCALE_ASSERT(squares.empty() || squares.size() == params_.size());
  weights_ = std::move(squares);
}

double weighted_sq_sum(const std::vector<torch::Tensor>& grads,
                       const std::vector<torch::Tensor>& weights) {
  DLSCALE_ASSERT(grads.size() == weights.size());
  std::vector<torch::Tensor> sums;
  for (size_t k = 0; k < grads.size(); ++k) {
    if (grads[k].defined() && weights[k].defined())
      sums.push_back(weighted_self_dot(grads[k], weights[k]));
  }
  return sums.empty() ? 0.0 : torch::stack(sums).to(torch::kFloat64).sum().cpu().item<double>();
}

double NoiseProbe::averaged_weighted_sq(const std::vector<torch::Tensor>& params) const {
  if (weights_.empty()) return std::numeric_limits<double>::quiet_NaN();
  DLSCALE_ASSERT(params.size() == weights_.size());
  std::vector<torch::Tensor> grads;
  for (const auto& p : params) grads.push_back(p.grad());
  return weighted_sq_sum(grads, weights_);
}

void NoiseProbe::begin_backward(int64_t micro_batch, double loss_scale) {
  const bool last = micro_batch + 1 == micro_batches_;
  // Several workers: the last pass carries the worker's whole step; one
  // worker: each earlier pass is one micro-batch, whose loss counted 1/K.
  counting_ = workers_ > 1 ? last : !last;
  const double k = workers_ > 1 ? 1.0 : static_cast<double>(micro_batches_);
  factor_ = (k / loss_scale) * (k / loss_scale);
}

void NoiseProbe::end_backward() {
  if (!counting_) return;
  counting_ = false;
  std::lock_guard<std::mutex> lock(mu_);
  auto total = [](std::vector<torch::Tensor>& parts) {
    const double sum =
        parts.empty() ? 0.0 : torch::stack(parts).to(torch::kFloat64).sum().cpu().item<double>();
    parts.clear();
    return sum;
  };
  small_sum_ += total(squares_) * factor_;
  small_weighted_sum_ += total(weighted_squares_) * factor_;
  ++small_passes_;
}

void NoiseProbe::finish_step(int64_t step, double averaged_sq, double averaged_weighted_sq,
                             const std::function<double(double)>& sum_over_workers) {
  const double passes = static_cast<double>(std::max<int64_t>(small_passes_, 1));
  double small = small_sum_ / passes;
  double small_weighted = served_ ? served_weighted_ : small_weighted_sum_ / passes;
  const bool weighted = !weights_.empty() || (served_ && std::isfinite(served_weighted_));
  skip_step();  // the next step starts afresh
  if (sum_over_workers) small = sum_over_workers(small) / workers_;
  plain_.add(step, small, averaged_sq);
  // The same on every worker: Adam's state is on each, sharded (zero) or
  // on the servers (ps).
  if (!weighted) return;
  if (sum_over_workers) small_weighted = sum_over_workers(small_weighted) / workers_;
  preconditioned_.add(step, small_weighted, averaged_weighted_sq);
}

void NoiseProbe::Track::add(int64_t step, double small_sq, double big_sq) {
  estimator.add(small_sq, big_sq);
  steps.push_back(step);
  b_simple.push_back(estimator.b_simple());
  gradient_sq.push_back(estimator.gradient_sq());
  trace_sigma.push_back(estimator.trace_sigma());
}

nlohmann::json NoiseProbe::Track::json() const {
  return {{"steps", estimator.steps()},
          {"b_simple", number_or_null(estimator.b_simple())},
          {"gradient_sq", number_or_null(estimator.gradient_sq())},
          {"trace_sigma", number_or_null(estimator.trace_sigma())},
          {"course",
           {{"step", steps},
            {"b_simple", numbers(b_simple)},
            {"gradient_sq", numbers(gradient_sq)},
            {"trace_sigma", numbers(trace_sigma)}}}};
}

void NoiseProbe::skip_step() {
  small_sum_ = 0;
  small_weighted_sum_ = 0;
  small_passes_ = 0;
  weights_.clear();
  served_ = false;
}

nlohmann::json NoiseProbe::report() const {
  nlohmann::json preconditioned;  // null: not measured (no Adam state on this worker)
  if (preconditioned_.estimator.steps() > 0) {
    preconditioned = preconditioned_.json();
    preconditioned["optimizer"] = "adam";
  }
  const NoiseEstimator& e = plain_.estimator;
  nlohmann::json out = plain_.json();
  out.update({{"summary", summary()},
              {"b_small", e.b_small()},
              {"b_big", e.b_big()},
              {"small_batch", workers_ > 1 ? "worker" : "micro-batch"},
              {"decay", e.decay()},
              {"every", every_},
              {"preconditioned", preconditioned}});
  return out;
}

void FinalNoise::add(const std::vector<torch::Tensor>& params) {
  torch::NoGradGuard no_grad;
  if (sum_.empty()) sum_.resize(params.size());
  DLSCALE_ASSERT(sum_.size() == params.size() &&
                 (weights_.empty() || weights_.size() == params.size()));
  for (size_t k = 0; k < params.size(); ++k) {
    const torch::Tensor& g = params[k].grad();
    if (!g.defined()) continue;
    const torch::Tensor dense = (g.is_sparse() ? g.to_dense() : g).to(torch::kDouble);
    // Kept on the gradients' device: no host synchronisation per tensor.
    sq_sum_ = accumulated(sq_sum_, dense.square().sum());
    if (!weights_.empty())
      weighted_sq_sum_ = accumulated(weighted_sq_sum_, weighted_double_sq(dense, weights_[k]));
    sum_[k] = sum_[k].defined() ? sum_[k].add_(dense) : dense.clone();
  }
  ++count_;
}

nlohmann::json FinalNoise::report(double seconds) const {
  torch::Tensor sum_sq, weighted_sum_sq;
  for (size_t k = 0; k < sum_.size(); ++k) {
    if (!sum_[k].defined()) continue;
    sum_sq = accumulated(sum_sq, sum_[k].square().sum());
    if (!weights_.empty())
      weighted_sum_sq = accumulated(weighted_sum_sq, weighted_double_sq(sum_[k], weights_[k]));
  }
  const FixedWeightsNoise plain =
      fixed_weights_noise(value_of(sum_sq), value_of(sq_sum_), count_, batch_);
  auto part = [](const FixedWeightsNoise& n) {
    return nlohmann::json{{"gradient_sq", number_or_null(n.gradient_sq)},
                          {"trace_sigma", number_or_null(n.trace_sigma)},
                          {"b_simple", number_or_null(n.b_simple())}};
  };
  nlohmann::json out = part(plain);
  out.update({{"steps", count_}, {"batch", batch_}, {"seconds", seconds}});
  std::string adam;
  if (!weights_.empty()) {
    const FixedWeightsNoise p =
        fixed_weights_noise(value_of(weighted_sum_sq), value_of(weighted_sq_sum_), count_, batch_);
    out["preconditioned"] = part(p);
    adam = fmt::format("; Adam-preconditioned {}", estimate_text(p.b_simple()));
  }
  out["summary"] = fmt::format(
      "gradient noise scale at the final weights: B_simple {} (|G|^2 {:.4g}, tr(Sigma) {:.4g}; "
      "{} batches of {:g}, {:.1f} s){}",
      estimate_text(plain.b_simple()), plain.gradient_sq, plain.trace_sigma, count_, batch_,
      seconds, adam);
  return out;
}

std::string NoiseProbe::summary() const {
  const NoiseEstimator& e = plain_.estimator;
  return fmt::format(
      "gradient noise scale: B_simple {} (|G|^2 {:.4g}, tr(Sigma) {:.4g}; batches {:g} and {:g}, "
      "{} step{} measured{}){}",
      estimate_text(e.b_simple()), e.gradient_sq(), e.trace_sigma(), e.b_small(), e.b_big(),
      e.steps(), e.steps() == 1 ? "" : "s", every_ > 1 ? fmt::format(", every {}", every_) : "",
      preconditioned_.estimator.steps() > 0
          ? fmt::format("; Adam-preconditioned {}",
                        estimate_text(preconditioned_.estimator.b_simple()))
          : "");
}

}  // namespace dlscale::train
