#pragma once
// Your own model (docs/models.md): a TorchScript module (`torch.jit.script`
// or `torch.jit.trace`, saved with `.save()`) as one more model behind the
// same spec as the zoo's, so every strategy, report and predictor takes it.
// `--model PATH.pt` (or `script:PATH`) names it; `--task-file` declares its
// task (models/task_file.h), image classification when none is given.
#include <torch/torch.h>

#include <string>

#include "libtorch/models/model.h"
#include "models/task_file.h"

namespace dlscale::models {

/// The spec of the TorchScript module `options.name` names, with the task
/// its --task-file declares: loaded, checked on a probe of one sample and
/// measured once per process (and file version). Throws dlscale::Error in
/// one line for a file that is missing, empty, a directory, too large for
/// this machine's memory, not TorchScript, or a module without trainable
/// parameters, whose forward does not take the declared inputs, raises,
/// or returns what the loss cannot take.
const ModelSpec& script_model_spec(const ModelOptions& options);

/// The task a task file declares (libtorch/models/declared_task.cpp).
std::shared_ptr<const Task> declared_task(const TaskDecl& decl);

/// "" when `out`, a declared task's model output for one sample, fits its
/// loss and target; else what it is and what the loss needs.
std::string output_mismatch(const TaskDecl& decl, const torch::Tensor& out);

}  // namespace dlscale::models
