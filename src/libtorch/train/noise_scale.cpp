#include "libtorch/train/noise_scale.h"

#include <fmt/format.h>

#include <cmath>

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

}  // namespace

NoiseProbe::NoiseProbe(std::vector<torch::Tensor> params, int workers, int64_t micro_batches,
                       int64_t local_batch, int64_t every)
    : params_(std::move(params)),
      workers_(workers),
      micro_batches_(micro_batches),
      every_(every),
      estimator_(workers > 1 ? static_cast<double>(local_batch * micro_batches)
                             : static_cast<double>(local_batch),
                 static_cast<double>(local_batch * micro_batches * workers)) {
  DLSCALE_ASSERT((workers > 1 || micro_batches > 1) && every >= 1);
  for (const auto& p : params_) {
    hooks_.push_back(p.register_hook([this](const torch::Tensor& grad) {
      if (!counting_ || !grad.defined()) return;
      torch::Tensor square = dp::self_dot(grad);
      std::lock_guard<std::mutex> lock(mu_);
      squares_.push_back(std::move(square));
    }));
  }
}

NoiseProbe::~NoiseProbe() {
  for (size_t k = 0; k < hooks_.size(); ++k) params_[k].remove_hook(hooks_[k]);
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
  const double sum = squares_.empty()
                         ? 0.0
                         : torch::stack(squares_).to(torch::kFloat64).sum().cpu().item<double>();
  squares_.clear();
  small_sum_ += sum * factor_;
  ++small_passes_;
}

void NoiseProbe::finish_step(int64_t step, double averaged_sq,
                             const std::function<double(double)>& sum_over_workers) {
  double small = small_passes_ > 0 ? small_sum_ / static_cast<double>(small_passes_) : 0.0;
  skip_step();  // the next step starts afresh
  if (sum_over_workers) small = sum_over_workers(small) / workers_;
  estimator_.add(small, averaged_sq);
  steps_.push_back(step);
  b_simple_.push_back(estimator_.b_simple());
  gradient_sq_.push_back(estimator_.gradient_sq());
  trace_sigma_.push_back(estimator_.trace_sigma());
}

void NoiseProbe::skip_step() {
  small_sum_ = 0;
  small_passes_ = 0;
}

nlohmann::json NoiseProbe::report() const {
  return {{"summary", summary()},
          {"b_small", estimator_.b_small()},
          {"b_big", estimator_.b_big()},
          {"small_batch", workers_ > 1 ? "worker" : "micro-batch"},
          {"decay", estimator_.decay()},
          {"every", every_},
          {"steps", estimator_.steps()},
          {"b_simple", number_or_null(estimator_.b_simple())},
          {"gradient_sq", number_or_null(estimator_.gradient_sq())},
          {"trace_sigma", number_or_null(estimator_.trace_sigma())},
          {"course",
           {{"step", steps_},
            {"b_simple", numbers(b_simple_)},
            {"gradient_sq", numbers(gradient_sq_)},
            {"trace_sigma", numbers(trace_sigma_)}}}};
}

std::string NoiseProbe::summary() const {
  const double b = estimator_.b_simple();
  return fmt::format(
      "gradient noise scale: B_simple {} (|G|^2 {:.4g}, tr(Sigma) {:.4g}; batches {:g} and {:g}, "
      "{} step{} measured{})",
      std::isfinite(b) ? fmt::format("{:.4g}", b) : "undefined (|G|^2 estimate not positive)",
      estimator_.gradient_sq(), estimator_.trace_sigma(), estimator_.b_small(), estimator_.b_big(),
      estimator_.steps(), estimator_.steps() == 1 ? "" : "s",
      every_ > 1 ? fmt::format(", every {}", every_) : "");
}

}  // namespace dlscale::train
