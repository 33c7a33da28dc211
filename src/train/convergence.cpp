#include "train/convergence.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

namespace dlscale::train {

nlohmann::json recipe_json(const RecipeOptions& r) {
  nlohmann::json j = nlohmann::json::object();
  record_inputs(r, j);
  j["target_accuracy"] = target_fraction(r.target_accuracy);
  return j;
}

nlohmann::json to_json(const EvalRecord& e) {
  return {{"step", e.step},       {"epoch", e.epoch},     {"top1", e.top1},
          {"top5", e.top5},       {"samples", e.samples}, {"seconds", e.seconds},
          {"run_seconds", e.run_seconds}};
}

EvalRecord eval_from_json(const nlohmann::json& j) {
  EvalRecord e;
  e.step = j.at("step").get<int64_t>();
  e.epoch = j.at("epoch").get<double>();
  e.top1 = j.at("top1").get<double>();
  e.top5 = j.at("top5").get<double>();
  e.samples = j.at("samples").get<int64_t>();
  e.seconds = j.at("seconds").get<double>();
  e.run_seconds = j.at("run_seconds").get<double>();
  return e;
}

nlohmann::json to_json(const ConvergenceSummary& c) {
  if (!c.enabled) return nullptr;
  nlohmann::json evals = nlohmann::json::array();
  for (const auto& e : c.evals) evals.push_back(to_json(e));
  const bool reached = c.status == "success";
  return {{"target", c.target},
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
          {"final_top1", c.evals.empty() ? nlohmann::json() : nlohmann::json(c.evals.back().top1)},
          {"final_top5", c.evals.empty() ? nlohmann::json() : nlohmann::json(c.evals.back().top5)},
          {"evals", evals}};
}

void print_eval_line(std::ostream& out, const EvalRecord& e) {
  fmt::print(out, "eval  epoch {:.2f}  top-1 {:.2f}%  top-5 {:.2f}%  ({} samples, {:.2f} s)\n",
             e.epoch, 100 * e.top1, 100 * e.top5, e.samples, e.seconds);
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
  const std::string acc =
      c.evals.empty() ? std::string("-") : fmt::format("{:.2f}%", 100 * c.evals.back().top1);
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
                      : fmt::format("top-1 {:.2f}%, top-5 {:.2f}% after {:.2f} epochs",
                                    100 * c.evals.back().top1, 100 * c.evals.back().top5,
                                    c.evals.back().epoch);
  fmt::print(out, "accuracy: {}\n", final_acc);
  if (c.status == "success") {
    fmt::print(out, "time to {:.2f}% top-1: {:.2f} s ({:.2f} epochs; init {:.2f} s, eval {:.2f} s "
                    "of it)\n",
               100 * c.target, c.run_seconds, c.epochs_to_target, c.init_seconds, c.eval_seconds);
  } else if (c.status == "aborted") {
    fmt::print(out, "target {:.2f}% top-1 not reached in {:.2f} epochs: status aborted "
                    "({:.2f} s)\n",
               100 * c.target, c.epochs_done, c.run_seconds);
  } else {
    fmt::print(out, "run time: {:.2f} s (init {:.2f} s, eval {:.2f} s)\n", c.run_seconds,
               c.init_seconds, c.eval_seconds);
  }
  out.flush();
}

}  // namespace dlscale::train
