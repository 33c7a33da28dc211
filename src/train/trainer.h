#pragma once
// Single-worker training benchmark: builds the model, optimizer and data from
// validated options, runs the steps and measures each phase of every step.
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "data/data_source.h"
#include "models/model.h"
#include "train/train_result.h"

namespace dlscale::train {

/// Receives progress from Trainer::run (on the calling thread).
class TrainObserver {
 public:
  virtual ~TrainObserver() = default;
  virtual void on_start(const TrainResult& result) {}
  virtual void on_step(const StepRecord& step, const TrainResult& result) {}
  virtual void on_finish(const TrainResult& result) {}
};

/// Prints the header, a step line every `display_every` steps (plus the first
/// and last), and the summary to `out`.
class ConsoleObserver : public TrainObserver {
 public:
  explicit ConsoleObserver(std::ostream& out) : out_(out) {}
  void on_start(const TrainResult& result) override;
  void on_step(const StepRecord& step, const TrainResult& result) override;
  void on_finish(const TrainResult& result) override;

 private:
  std::ostream& out_;
};

class Trainer {
 public:
  /// Validates `options` (throws dlscale::Error on bad input) and builds the
  /// model, optimizer and data. `argv` is recorded in the result as given.
  explicit Trainer(const TrainOptions& options, std::vector<std::string> argv = {});
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  /// Runs every step, reporting to `observer`; returns the full result.
  /// Writes the JSON record atomically when options.json_path is set.
  TrainResult run(TrainObserver& observer);

  models::Model& model() { return *model_; }
  const ResolvedTrainOptions& config() const { return result_.config; }

 private:
  StepRecord run_step(int64_t step);

  TrainResult result_;
  torch::Device device_;
  double aux_loss_weight_ = 0;
  std::shared_ptr<models::Model> model_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  std::unique_ptr<data::DataSource> data_;
};

}  // namespace dlscale::train
