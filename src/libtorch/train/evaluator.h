#pragma once
// Distributed evaluation on the held-out split (docs/convergence.md): each
// rank evaluates its contiguous part of the test set in eval mode with its
// model's task's metrics; the per-metric sums are added over ranks, so N
// workers report what one would.
#include <functional>
#include <memory>
#include <vector>

#include "libtorch/comm/communicator.h"
#include "libtorch/data/data_spec.h"
#include "libtorch/models/model.h"

namespace dlscale::train {

struct EvalSums {
  std::vector<double> sums;  ///< one per metric of the task (Task::evaluate)
  int64_t samples = 0;       ///< samples evaluated
};

class Evaluator {
 public:
  /// Opens nothing: `test` is the opened test split, `source` the worker's
  /// slicing (its global_batch is the evaluation batch over all ranks).
  Evaluator(const data::OpenedData& test, const data::DataOptions& options,
            data::SourceOptions source, std::shared_ptr<const models::Task> task);
  /// One pass over the test set with `model` in eval mode (restored to
  /// training mode after), calling `progress` before each batch (so a
  /// launcher watching for silent workers sees this one alive). With
  /// `comm`, every rank must call it; all get the job's totals.
  EvalSums run(models::Model& model, comm::Communicator* comm,
               const std::function<void()>& progress = {});
  /// Samples in the test split.
  int64_t samples() const { return samples_; }

 private:
  std::unique_ptr<data::DataSource> source_;
  std::shared_ptr<const models::Task> task_;
  int64_t samples_ = 0;
  int64_t batches_ = 0;  ///< this rank's batches per pass
  int64_t next_step_ = 0;
};

}  // namespace dlscale::train
