#include "libtorch/train/evaluator.h"

#include "core/error.h"

namespace dlscale::train {

Evaluator::Evaluator(const data::OpenedData& test, const data::DataOptions& options,
                     data::SourceOptions source, std::shared_ptr<const models::Task> task)
    : task_(std::move(task)) {
  DLSCALE_ASSERT(task_ != nullptr);
  source.train = false;
  samples_ = test.dataset ? test.dataset->info().size : options.synthetic_test;
  source_ = data::make_data_source(test, options, source);
  batches_ = source_->steps_per_epoch();
}

EvalSums Evaluator::run(models::Model& model, comm::Communicator* comm,
                        const std::function<void()>& progress) {
  EvalSums mine;
  mine.sums.assign(task_->metrics().size(), 0.0);
  model.eval();
  {
    torch::NoGradGuard no_grad;
    for (int64_t b = 0; b < batches_; ++b) {
      if (progress) progress();
      const data::Batch batch = source_->batch(next_step_++);
      const std::vector<double> s = task_->evaluate(model.forward(batch.inputs), batch.targets);
      DLSCALE_ASSERT(s.size() == mine.sums.size());
      for (size_t m = 0; m < s.size(); ++m) mine.sums[m] += s[m];
      mine.samples += batch.size();
    }
  }
  model.train();
  if (comm == nullptr || comm->size() == 1) return mine;
  // Gathered, then added in rank order on every rank: all get the same
  // totals (exact for counts, which double holds up to 2^53).
  std::vector<double> mine_all = mine.sums;
  mine_all.push_back(static_cast<double>(mine.samples));
  const torch::Tensor all = comm->allgather(torch::tensor(mine_all, torch::kFloat64));
  const torch::Tensor sum = all.view({comm->size(), -1}).sum(0);
  EvalSums total;
  for (size_t m = 0; m < mine.sums.size(); ++m) total.sums.push_back(sum[static_cast<int64_t>(m)].item<double>());
  total.samples = static_cast<int64_t>(sum[static_cast<int64_t>(mine.sums.size())].item<double>());
  return total;
}

}  // namespace dlscale::train
