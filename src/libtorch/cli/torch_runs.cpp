// The LibTorch side of the executables' seam (cli/torch_commands.h): linked
// into dlscale-torch, these run the commands that train or benchmark.
#include <algorithm>
#include <cstdlib>
#include <iostream>

#include "cli/commands.h"
#include "cli/torch_commands.h"
#include "libtorch/commbench/commbench.h"
#include "core/error.h"
#include "core/sysinfo.h"
#include "libtorch/commbench/commbench_job.h"
#include "libtorch/data/data_bench.h"
#include "launch/launch_env.h"
#include "libtorch/launch/train_job.h"
#include "libtorch/predict/zoo_profile.h"

namespace dlscale::cli {
namespace {

/// The one place where dlscale reads the environment (docs/launch.md).
launch::LaunchEnv launch_env() {
  return launch::detect_launch_env([](const char* name) { return std::getenv(name); });
}

}  // namespace

void run_train_command(const CLI::App& command, launch::TrainJobOptions& options,
                       const std::vector<std::string>& argv) {
  note_given_launch_flags(&command, options.launch);
  launch::run_train(options, launch_env(), argv, std::cout);
}

void run_commbench_command(const CLI::App& command, CommbenchFlags& f, const std::vector<std::string>& argv) {
  f.options.min_bytes = commbench::parse_size(f.options.min_size, "--min-bytes");
  f.options.max_bytes = commbench::parse_size(f.options.max_size, "--max-bytes");
  DLSCALE_CHECK(f.threads >= 0, "--threads must be >= 0 (got {})", f.threads);
  f.job.threads_per_worker =
      f.threads > 0 ? f.threads : std::max(1, available_cores() / std::max(1, f.job.launch.workers));
  launch::check_job_options(f.job);
  note_given_launch_flags(&command, f.job.launch);
  commbench::run_commbench_job(f.options, f.job, launch_env(), argv, std::cout);
}

void run_data_bench_command(const data::DataBenchOptions& options, const std::vector<std::string>&) {
  data::run_data_bench(options, std::cout);
}

predict::BackwardProfile zoo_backward_profile(const std::string& model, const models::ModelOptions& options,
                                              double& flops, const std::vector<std::string>&) {
  return predict::flops_backward_profile(model, options, flops);
}

}  // namespace dlscale::cli
