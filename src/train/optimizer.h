#pragma once
#include <torch/torch.h>

#include <memory>
#include <vector>

#include "dp/gradient_sync.h"
#include "train/train_options.h"

namespace dlscale::train {

/// The LibTorch optimizer for `kind` over `params`: plain SGD, SGD with
/// (Nesterov) momentum, or Adam; with learning rate and weight decay.
std::unique_ptr<torch::optim::Optimizer> make_optimizer(OptimizerKind kind,
                                                        std::vector<torch::Tensor> params,
                                                        const TrainOptions& options);

/// make_optimizer() for `config`, as a parameter-server shard takes it.
dp::OptimizerFactory optimizer_factory(const ResolvedTrainOptions& config);

}  // namespace dlscale::train
