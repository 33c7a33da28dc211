// dlscale train: the training benchmark (flags → TrainOptions → Trainer).
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "models/model.h"
#include "train/trainer.h"

namespace dlscale::cli {

void add_train_command(CLI::App& app, const std::vector<std::string>& argv) {
  auto opts = std::make_shared<train::TrainOptions>();
  CLI::App* cmd = app.add_subcommand(
      "train",
      "Train a model on synthetic data and measure throughput and where the time goes.\n"
      "Prints a header, a line every --display-every steps and a summary (global samples/s, "
      "mean +/- standard error and jitter of per-step rates, p50/p95 step time, median "
      "per-phase breakdown).");
  cmd->add_option("--model,-m", opts->model, "Model to train; one of: " + models::known_model_names())
      ->capture_default_str();
  cmd->add_option("--batch,-b", opts->batch, "Samples per step per worker")->capture_default_str();
  cmd->add_option("--steps", opts->steps,
                  "Total steps including warm-up; measured steps = steps - warmup")
      ->capture_default_str();
  cmd->add_option("--warmup", opts->warmup, "Warm-up steps excluded from the measurement")
      ->capture_default_str();
  cmd->add_option("--threads,-t", opts->threads,
                  "Intra-op compute threads (LibTorch and BLAS); 0 = every core available")
      ->capture_default_str();
  cmd->add_option("--image-size", opts->image_size,
                  "Input height = width in pixels; 0 = the model's default (see 'dlscale models')")
      ->capture_default_str();
  cmd->add_option("--classes", opts->num_classes, "Output classes; 0 = the model's default")
      ->capture_default_str();
  cmd->add_flag("--aux-logits", opts->aux_logits,
                "Build and train the auxiliary classifiers (googlenet, inception3)");
  cmd->add_option("--optimizer", opts->optimizer, "sgd | momentum | nesterov | adam")
      ->capture_default_str();
  cmd->add_option("--lr", opts->lr, "Learning rate")->capture_default_str();
  cmd->add_option("--momentum", opts->momentum, "Momentum for --optimizer momentum|nesterov")
      ->capture_default_str();
  cmd->add_option("--weight-decay", opts->weight_decay, "L2 weight decay")->capture_default_str();
  cmd->add_option("--seed", opts->seed, "Seed of model initialization and synthetic data")
      ->capture_default_str();
  cmd->add_option("--display-every", opts->display_every,
                  "Print a step line every N steps (and the first and last); 0 = none")
      ->capture_default_str();
  cmd->add_option("--synthetic-batches", opts->synthetic_batches,
                  "Distinct synthetic batches generated once and cycled through")
      ->capture_default_str();
  cmd->add_option("--device", opts->device, "cpu | cuda | cuda:N (cuda needs a CUDA LibTorch build)")
      ->capture_default_str();
  cmd->add_option("--memory-format", opts->memory_format,
                  "channels-last | contiguous: layout of images and conv weights (channels-last "
                  "is faster with oneDNN on CPU)")
      ->capture_default_str();
  cmd->add_flag("!--no-malloc-tuning", opts->keep_freed_memory,
                "Leave glibc malloc at its defaults (by default dlscale keeps freed memory for "
                "reuse instead of unmapping it every step)");
  cmd->add_option("--json", opts->json_path,
                  "Write the self-describing JSON result record here (atomically)");
  cmd->callback([opts, argv] {
    train::Trainer trainer(*opts, argv);
    train::ConsoleObserver console(std::cout);
    trainer.run(console);
  });
}

}  // namespace dlscale::cli
