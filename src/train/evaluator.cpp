#include "train/evaluator.h"

#include "core/error.h"

namespace dlscale::train {

EvalCounts count_correct(const torch::Tensor& logits, const torch::Tensor& labels) {
  EvalCounts c;
  c.samples = labels.size(0);
  if (c.samples == 0) return c;
  const int64_t k = std::min<int64_t>(5, logits.size(1));
  const torch::Tensor top = std::get<1>(logits.topk(k, 1));  // [n, k], best first
  const torch::Tensor hits = top.eq(labels.unsqueeze(1));
  c.top1 = hits.select(1, 0).sum().item<int64_t>();
  c.top5 = hits.any(1).sum().item<int64_t>();
  return c;
}

Evaluator::Evaluator(const data::OpenedData& test, const data::DataOptions& options,
                     data::SourceOptions source) {
  DLSCALE_ASSERT(test.dataset != nullptr);
  source.train = false;
  samples_ = test.dataset->info().size;
  source_ = data::make_data_source(test, options, source);
  batches_ = source_->steps_per_epoch();
}

EvalCounts Evaluator::run(models::Model& model, comm::Communicator* comm,
                          const std::function<void()>& progress) {
  EvalCounts mine;
  model.eval();
  {
    torch::NoGradGuard no_grad;
    for (int64_t b = 0; b < batches_; ++b) {
      if (progress) progress();
      const data::Batch batch = source_->batch(next_step_++);
      const EvalCounts c = count_correct(model.forward(batch.inputs).main.cpu(), batch.labels.cpu());
      mine.top1 += c.top1;
      mine.top5 += c.top5;
      mine.samples += c.samples;
    }
  }
  model.train();
  if (comm == nullptr || comm->size() == 1) return mine;
  // Integers summed exactly: gathered, then added on every rank.
  const torch::Tensor all =
      comm->allgather(torch::tensor({mine.top1, mine.top5, mine.samples}, torch::kInt64));
  const torch::Tensor sum = all.sum(0);
  return {sum[0].item<int64_t>(), sum[1].item<int64_t>(), sum[2].item<int64_t>()};
}

}  // namespace dlscale::train
