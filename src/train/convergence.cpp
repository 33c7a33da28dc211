#include "train/convergence.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include "core/record_keys.h"

namespace dlscale::train {

nlohmann::json recipe_json(const RecipeOptions& r) {
  nlohmann::json j = nlohmann::json::object();
  record_inputs(r, j);
  j["target_accuracy"] = target_fraction(r.target_accuracy);
  return j;
}

double EvalRecord::metric(const std::string& name) const {
  for (const auto& [n, v] : metrics) {
    if (n == name) return v;
  }
  return 0;
}

bool is_eval_field(const std::string& key) {
  return key == "step" || key == "epoch" || key == "samples" || key == "seconds" || key == "run_seconds";
}

nlohmann::json to_json(const EvalRecord& e) {
  nlohmann::json j = {{"step", e.step},       {"epoch", e.epoch},         {"samples", e.samples},
                      {"seconds", e.seconds}, {"run_seconds", e.run_seconds}};
  for (const auto& [name, value] : e.metrics) j[name] = value;
  return j;
}

EvalRecord eval_from_json(const nlohmann::json& j) {
  EvalRecord e;
  e.step = j.at("step").get<int64_t>();
  e.epoch = j.at("epoch").get<double>();
  e.samples = j.at("samples").get<int64_t>();
  e.seconds = j.at("seconds").get<double>();
  e.run_seconds = j.at("run_seconds").get<double>();
  for (const auto& [key, value] : j.items()) {
    if (!is_eval_field(key)) e.metrics.emplace_back(key, value.get<double>());
  }
  return e;
}

nlohmann::json to_json(const ConvergenceSummary& c) {
  if (!c.enabled) return nullptr;
  nlohmann::json evals = nlohmann::json::array();
  for (const auto& e : c.evals) evals.push_back(to_json(e));
  const bool reached = c.status == "success";
  nlohmann::json j = {{"target", c.target},
                      {"status", c.status},
                      {"time_to_accuracy_s", reached ? nlohmann::json(c.run_seconds) : nlohmann::json()},
                      {"epochs_to_target", reached ? nlohmann::json(c.epochs_to_target) : nlohmann::json()},
                      {"init_s", c.init_seconds},
                      {"run_s", c.run_seconds},
                      {"eval_s", c.eval_seconds},
                      {"checkpoint_s", c.checkpoint_seconds},
                      {"steps_done", c.steps_done},
                      {"epochs_done", c.epochs_done},
                      {"resumed_from_step", c.resumed_from_step},
                      {"lr_peak", c.lr_peak},
                      {"lr_warmup_steps", c.lr_warmup_steps},
                      {"evals", evals}};
  for (const MetricSpec& m : c.metrics) {
    j["final_" + m.name] = c.evals.empty() ? nlohmann::json() : nlohmann::json(c.evals.back().metric(m.name));
  }
  if (!c.metrics.empty()) {  // the target's metric, named for the reports
    j[record::kConvergenceMetric] = c.metrics.front().name;
    j[record::kConvergenceFinalAccuracy] = j["final_" + c.metrics.front().name];
  }
  return j;
}

namespace {

/// "88.12%" for a fraction shown as a percentage, else the number.
std::string value_text(const MetricSpec& m, double value) {
  return m.percent ? fmt::format("{:.2f}%", 100 * value) : fmt::format("{:.4g}", value);
}

/// "top-1 88.12%<sep>top-5 99.71%": the metrics of `e` in the task's order.
std::string metrics_text(const EvalRecord& e, const std::vector<MetricSpec>& metrics, const char* sep) {
  std::string s;
  for (const MetricSpec& m : metrics) {
    s += fmt::format("{}{} {}", s.empty() ? "" : sep, m.label, value_text(m, e.metric(m.name)));
  }
  return s;
}

}  // namespace

void print_eval_line(std::ostream& out, const EvalRecord& e, const std::vector<MetricSpec>& metrics) {
  fmt::print(out, "eval  epoch {:.2f}  {}  ({} samples, {:.2f} s)\n", e.epoch, metrics_text(e, metrics, "  "),
             e.samples, e.seconds);
  out.flush();
}

namespace {

std::string clock_text(double seconds) {
  const auto s = static_cast<int64_t>(seconds + 0.5);
  return s >= 3600 ? fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
                   : fmt::format("{}:{:02}", s / 60, s % 60);
}

}  // namespace

void print_progress_line(std::ostream& out, int64_t step, int64_t total_steps,
                         int64_t steps_per_epoch, double loss, double lr,
                         const ConvergenceSummary& c, double seconds_per_step) {
  const double epochs = static_cast<double>(total_steps) / static_cast<double>(steps_per_epoch);
  const std::string acc = c.evals.empty() || c.metrics.empty()
                              ? std::string("-")
                              : value_text(c.metrics.front(), c.evals.back().metric(c.metrics.front().name));
  fmt::print(out, "epoch {:.2f}/{:.2f}  step {:>6}/{:<6}  loss {:.4f}  acc {}  lr {:.4g}  ETA {}\n",
             static_cast<double>(step + 1) / static_cast<double>(steps_per_epoch), epochs,
             step + 1, total_steps, loss, acc, lr,
             clock_text(seconds_per_step * static_cast<double>(total_steps - step - 1)));
  out.flush();
}

void print_convergence_summary(std::ostream& out, const ConvergenceSummary& c) {
  if (!c.enabled) return;
  const std::string final_acc =
      c.evals.empty() ? std::string("no evaluation")
                      : fmt::format("{} after {:.2f} epochs", metrics_text(c.evals.back(), c.metrics, ", "),
                                    c.evals.back().epoch);
  fmt::print(out, "accuracy: {}\n", final_acc);
  // A target is set on the task's first metric.
  const std::string target = c.metrics.empty() ? std::string()
                                               : value_text(c.metrics.front(), c.target) + " " + c.metrics.front().label;
  if (c.status == "success") {
    fmt::print(out, "time to {}: {:.2f} s ({:.2f} epochs; init {:.2f} s, eval {:.2f} s of it)\n", target,
               c.run_seconds, c.epochs_to_target, c.init_seconds, c.eval_seconds);
  } else if (c.status == "aborted") {
    fmt::print(out, "target {} not reached in {:.2f} epochs: status aborted ({:.2f} s)\n", target,
               c.epochs_done, c.run_seconds);
  } else {
    fmt::print(out, "run time: {:.2f} s (init {:.2f} s, eval {:.2f} s)\n", c.run_seconds,
               c.init_seconds, c.eval_seconds);
  }
  out.flush();
}

}  // namespace dlscale::train
