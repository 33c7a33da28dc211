// `dlscale train`'s convergence flags (docs/convergence.md): epochs,
// evaluation, target, learning-rate recipe, LARS, logs and checkpoints.
#include "cli/commands.h"
#include "train/recipe.h"

namespace dlscale::cli {

namespace {

void add_schedule_flags(CLI::App* cmd, train::RecipeOptions& r, const std::string& group) {
  cmd->add_option("--lr-scaling", r.lr_scaling,
                  "none | linear: peak rate = --lr x global batch / --base-batch (Goyal et al. "
                  "2017)")
      ->capture_default_str()->group(group);
  cmd->add_option("--base-batch", r.base_batch, "The global batch --lr is meant for (linear scaling)")
      ->capture_default_str()->group(group);
  cmd->add_option("--warmup-epochs", r.warmup_epochs,
                  "Ramp the rate linearly to its peak over this many epochs (gradual warm-up)")
      ->capture_default_str()->group(group);
  cmd->add_option("--warmup-start-factor", r.warmup_start_factor,
                  "Warm-up starts at this fraction of the peak rate")
      ->capture_default_str()->group(group);
  cmd->add_option("--lr-schedule", r.lr_schedule,
                  "constant | step (x --lr-gamma at each of --lr-milestones) | poly (power "
                  "--lr-power) | cosine | onecycle (PyTorch OneCycleLR)")
      ->capture_default_str()->group(group);
  cmd->add_option("--lr-milestones", r.lr_milestones,
                  "step: epochs at which the rate is multiplied by --lr-gamma, e.g. 30,60,80")
      ->delimiter(',')->group(group);
  cmd->add_option("--lr-gamma", r.lr_gamma, "step: factor at each milestone")
      ->capture_default_str()->group(group);
  cmd->add_option("--lr-power", r.lr_power, "poly: (1 - t)^power decay after warm-up")
      ->capture_default_str()->group(group);
  cmd->add_option("--lr-end-factor", r.lr_end_factor,
                  "poly, cosine: the final rate as a fraction of the peak")
      ->capture_default_str()->group(group);
  cmd->add_option("--onecycle-pct", r.onecycle_pct,
                  "onecycle: fraction of the run spent rising to the peak")
      ->capture_default_str()->group(group);
}

void add_optimizer_extras(CLI::App* cmd, train::RecipeOptions& r, const std::string& group) {
  cmd->add_option("--lars-eta", r.lars_eta, "LARS trust coefficient (--optimizer lars)")
      ->capture_default_str()->group(group);
  cmd->add_option("--wd-exclude", r.wd_exclude,
                  "auto | none | bias-norm: exempt biases and norm weights (1-D tensors) from "
                  "weight decay and LARS's trust ratio; auto = bias-norm for lars, none otherwise")
      ->capture_default_str()->group(group);
  cmd->add_option("--label-smoothing", r.label_smoothing,
                  "Label smoothing of the cross-entropy loss (Szegedy et al. 2016)")
      ->capture_default_str()->group(group);
}

void add_log_flags(CLI::App* cmd, train::RecipeOptions& r, const std::string& group) {
  cmd->add_option("--mllog", r.mllog_path,
                  "Write MLPerf Training-style ':::MLLOG {json}' lines here (rank 0; "
                  "docs/mllog.md)")
      ->group(group);
  cmd->add_option("--checkpoint", r.checkpoint_path,
                  "Checkpoint file (written atomically by rank 0, replaced each time; "
                  "'{step}' in the name keeps one file per checkpoint, e.g. ckpt-{step}.bin)")
      ->group(group);
  cmd->add_option("--checkpoint-every", r.checkpoint_every,
                  "Write a checkpoint every N steps; without it or --checkpoint-every-epochs (or "
                  "with 0), --checkpoint writes one when the run ends")
      ->group(group);
  cmd->add_option("--checkpoint-every-epochs", r.checkpoint_every_epochs,
                  "Write a checkpoint every E epochs")
      ->group(group);
  cmd->add_option("--resume", r.resume_path,
                  "Continue exactly from this checkpoint (same model, workers and batch)")
      ->group(group);
}

}  // namespace

CLI::Option* add_recipe_flags(CLI::App* cmd, train::RecipeOptions& r) {
  const std::string group = "Convergence (docs/convergence.md)";
  CLI::Option* epochs =
      cmd->add_option("--epochs", r.epochs,
                      "Train this many epochs (may be fractional) instead of --steps; "
                      "evaluates after each epoch unless told otherwise")
          ->group(group);
  cmd->add_option("--eval-every", r.eval_every, "Evaluate on the test split every E epochs")
      ->group(group);
  cmd->add_option("--eval-every-steps", r.eval_every_steps,
                  "Evaluate on the test split every N steps")
      ->group(group);
  cmd->add_option("--eval-batch", r.eval_batch, "Evaluation samples per batch per worker")
      ->capture_default_str()->group(group);
  cmd->add_option("--target-accuracy", r.target_accuracy,
                  "Stop at the first evaluation whose top-1 reaches this (0.9 or 90 = 90%); a "
                  "run that ends without it has status aborted")
      ->group(group);
  add_schedule_flags(cmd, r, group);
  add_optimizer_extras(cmd, r, group);
  add_log_flags(cmd, r, group);
  return epochs;
}

}  // namespace dlscale::cli
