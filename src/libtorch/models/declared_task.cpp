// A task declared in a task file (models/task_file.h): the inputs and the
// target a TorchScript module's author states, one of three losses, the
// metrics that loss allows, and a throughput unit. Its synthetic data is
// Task's default (Gaussian floats, uniform integer IDs): fit for timing,
// not for learning.
#include <fmt/format.h>

#include "core/error.h"
#include "libtorch/models/model.h"
#include "models/task_file.h"

namespace dlscale::models {

namespace {

torch::ScalarType dtype_of(const std::string& name) {
  if (name == "float64") return torch::kFloat64;
  if (name == "int64") return torch::kInt64;
  if (name == "int32") return torch::kInt32;
  return torch::kFloat32;
}

TensorSpec spec_of(const TensorDecl& t) {
  return {t.name, dtype_of(t.dtype), t.shape, t.low, t.high};
}

MetricSpec metric_of(const std::string& name) {
  if (name == "top1") return {"top1", "top-1", true, true};
  if (name == "top5") return {"top5", "top-5", true, true};
  if (name == "accuracy") return {"accuracy", "accuracy", true, true};
  return {"mse", "mse", false, false};
}

/// Per sample: the mean over all but the batch dimension, summed over the batch.
double per_sample_sum(const torch::Tensor& values) {
  if (values.numel() == 0) return 0;
  return values.to(torch::kFloat64).reshape({values.size(0), -1}).mean(1).sum().item<double>();
}

class DeclaredTask : public Task {
 public:
  explicit DeclaredTask(TaskDecl decl) : d_(std::move(decl)) {}

  std::string name() const override { return d_.name; }

  std::vector<TensorSpec> inputs(const ModelSpec&, const ModelOptions&) const override {
    std::vector<TensorSpec> out;
    for (const auto& t : d_.inputs) out.push_back(spec_of(t));
    return out;
  }

  std::vector<TensorSpec> targets(const ModelSpec&, const ModelOptions&) const override {
    return {spec_of(d_.target)};
  }

  torch::Tensor loss(const Output& out, const TensorMap& targets,
                     const LossOptions& o) const override {
    namespace F = torch::nn::functional;
    const torch::Tensor& t = targets.at(d_.target.name);
    switch (d_.loss) {
      case LossKind::kCrossEntropy:
        return F::cross_entropy(out.main, t,
                                F::CrossEntropyFuncOptions().label_smoothing(o.label_smoothing));
      case LossKind::kBceWithLogits:
        return F::binary_cross_entropy_with_logits(out.main, t.to(out.main.dtype()));
      case LossKind::kMse:
        return F::mse_loss(out.main, t.to(out.main.dtype()));
    }
    return {};
  }

  std::vector<MetricSpec> metrics() const override {
    std::vector<MetricSpec> out;
    for (const auto& m : d_.metrics) out.push_back(metric_of(m));
    return out;
  }

  std::vector<double> evaluate(const Output& out, const TensorMap& targets) const override {
    const torch::Tensor y = out.main.detach().cpu();
    const torch::Tensor t = targets.at(d_.target.name).cpu();
    std::vector<double> sums;
    for (const auto& m : d_.metrics) {
      if (m == "top1" || m == "top5") {
        const int64_t k = std::min<int64_t>(m == "top1" ? 1 : 5, y.size(1));
        const torch::Tensor top = std::get<1>(y.topk(k, 1));  // [n, k, ...]
        sums.push_back(per_sample_sum(top.eq(t.unsqueeze(1)).any(1)));
      } else if (m == "accuracy") {
        sums.push_back(per_sample_sum(y.gt(0).eq(t.gt(0.5))));
      } else {
        sums.push_back(per_sample_sum((y - t.to(y.dtype())).square()));
      }
    }
    return sums;
  }

  ThroughputUnit unit(const ModelSpec&, const ModelOptions&) const override {
    return {d_.unit, d_.items_per_sample};
  }

 private:
  TaskDecl d_;
};

/// A shape for messages: "a scalar" for a scalar's.
std::string shape_words(torch::IntArrayRef sizes) {
  const std::string text = shape_text(sizes);
  return text.empty() ? "a scalar" : text;
}

}  // namespace

std::shared_ptr<const Task> declared_task(const TaskDecl& decl) {
  return std::make_shared<DeclaredTask>(decl);
}

std::string output_mismatch(const TaskDecl& d, const torch::Tensor& out) {
  const TensorDecl& t = d.target;
  std::vector<int64_t> want = {1};  // a probe of one sample
  if (d.loss == LossKind::kCrossEntropy) want.push_back(t.high);
  want.insert(want.end(), t.shape.begin(), t.shape.end());
  if (out.sizes().vec() == want && out.is_floating_point()) return "";
  return fmt::format(
      "its output for one sample is {} {}; loss {} against target '{}' needs float {}",
      shape_words(out.sizes()), c10::toString(out.scalar_type()), loss_name(d.loss), t.name,
      shape_words(want));
}

}  // namespace dlscale::models
