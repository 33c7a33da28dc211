// dlscale train: the training benchmark (flags → TrainJobOptions → the job).
// Every flag comes from an options table (core/option_table.h); the flags are
// torch-free, the run is behind the executables' seam (cli/torch_commands.h).
#include <memory>

#include "cli/commands.h"
#include "cli/option_binding.h"
#include "cli/torch_commands.h"

namespace dlscale::cli {

void add_data_flags(CLI::App* cmd, data::DataOptions& options) {
  add_options(cmd, options, "Data (docs/data.md)");
}

void add_launch_flags(CLI::App* cmd, launch::LaunchOptions& options, const std::string& group) {
  add_options(cmd, options, group);
}

void note_given_launch_flags(const CLI::App* cmd, launch::LaunchOptions& options) {
  options.master_addr_given = cmd->count("--master-addr") > 0;
  options.master_port_given = cmd->count("--master-port") > 0;
}

void add_train_flags(CLI::App* cmd, launch::TrainJobOptions& options) {
  train::TrainOptions& t = options.train;
  add_options(cmd, t.model, "");
  add_options(cmd, t.run, "");
  add_options(cmd, t.optimizer, "");
  add_options(cmd, t.compute, "");
  add_options(cmd, t.output, "");
  add_data_flags(cmd, t.data);
  const std::string convergence = "Convergence (docs/convergence.md)";
  add_options(cmd, t.recipe, convergence);
  cmd->get_option("--epochs")->excludes(cmd->get_option("--steps"));
  const std::string dp = "Data parallelism";
  add_launch_flags(cmd, options.launch, dp);
  add_options(cmd, t.sync, dp);
  add_options(cmd, t.sync.ps, "Parameter server (--strategy ps)");
}

void add_train_command(CLI::App& app, const std::vector<std::string>& argv) {
  auto opts = std::make_shared<launch::TrainJobOptions>();
  CLI::App* cmd = app.add_subcommand(
      "train",
      "Train a model on synthetic or real data (--data) and measure throughput and where the "
      "time goes.\n"
      "Prints a header, a line every --display-every steps and a summary (global samples/s, "
      "mean +/- standard error and jitter of per-step rates, p50/p95 step time, median "
      "per-phase breakdown).");
  add_train_flags(cmd, *opts);
  cmd->callback([cmd, opts, argv] { run_train_command(*cmd, *opts, argv); });
}

}  // namespace dlscale::cli
