#pragma once
// Each subcommand registers its flags on the app and a callback that calls
// one library function. Errors propagate as exceptions to main().
#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace dlscale::data {
struct DataOptions;
}
namespace dlscale::launch {
struct LaunchOptions;
struct TrainJobOptions;
}

namespace dlscale::cli {

/// Thrown by a command that finished its work but must exit non-zero
/// without an error line (a sweep with failed runs, an interrupted sweep).
struct ExitWith {
  int code;
};

void add_models_command(CLI::App& app, const std::vector<std::string>& argv);
/// The --data and pipeline flags, shared by `train` and `data bench`.
void add_data_flags(CLI::App* command, data::DataOptions& options);
/// The launch flags every job command shares (train, commbench), in help
/// group `group`.
void add_launch_flags(CLI::App* command, launch::LaunchOptions& options, const std::string& group);
/// Records in `options` which rendezvous flags the command line gave (call
/// in the command's callback).
void note_given_launch_flags(const CLI::App* command, launch::LaunchOptions& options);
void add_train_command(CLI::App& app, const std::vector<std::string>& argv);
void add_commbench_command(CLI::App& app, const std::vector<std::string>& argv);
struct CommbenchFlags;
/// The flags of `train` and `commbench` on `command`, their values landing
/// in `options` (which must outlive the parse); no callback. The sweep
/// parses each planned run's flags with them before any run starts.
void add_train_flags(CLI::App* command, launch::TrainJobOptions& options);
void add_commbench_flags(CLI::App* command, CommbenchFlags& flags);
/// Needs the train command registered first (it checks sweep parameters
/// against the train options).
void add_sweep_command(CLI::App& app);
void add_results_command(CLI::App& app);
void add_report_command(CLI::App& app);
void add_data_command(CLI::App& app, const std::vector<std::string>& argv);
void add_cluster_command(CLI::App& app);
void add_predict_command(CLI::App& app, const std::vector<std::string>& argv);

}  // namespace dlscale::cli
