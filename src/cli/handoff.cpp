// The torch-free side of the executables' seam (cli/torch_commands.h):
// linked into `dlscale`, the commands that need LibTorch hand their whole
// command line over to dlscale-torch, found beside this executable.
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>

#include "cli/commands.h"
#include "cli/torch_commands.h"
#include "core/error.h"
#include "core/sysinfo.h"
#include "launch/cluster_launcher.h"
#include "launch/train_job_options.h"

namespace dlscale::cli {
namespace {

/// Replaces this process with dlscale-torch and the same arguments; returns
/// only by throwing, naming what could not be started and why.
[[noreturn]] void hand_off(const std::vector<std::string>& argv) {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  const std::filesystem::path torch = (ec ? std::filesystem::path(argv.at(0)) : self).parent_path() / kTorchExecutable;
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  default_openmp_wait();
  defer_blas_pool();
  skip_unused_libraries(torch.parent_path().string());
  ::execv(torch.c_str(), args.data());
  const int err = errno;
  // There but not executable (EACCES): the fix is its mode, not a build.
  const bool present = err == EACCES && std::filesystem::is_regular_file(torch, ec);
  const std::string fix = present ? fmt::format("make it executable with 'chmod +x {}'", torch.string())
                                  : fmt::format("build it with 'cmake --build {}'", torch.parent_path().string());
  throw Error(fmt::format("'{}' needs {}, which could not be started: {} ({})", argv.size() > 1 ? argv[1] : "",
                          torch.string(), std::strerror(err), fix));
}

/// A command whose arguments dlscale-torch alone parses (--help included).
void add_passed_through(CLI::App& app, const char* name, const char* about, const std::vector<std::string>& argv) {
  CLI::App* cmd = app.add_subcommand(name, about);
  cmd->set_help_flag();
  cmd->prefix_command();
  cmd->callback([argv] { hand_off(argv); });
}

}  // namespace

void run_train_command(const CLI::App&, launch::TrainJobOptions& options,
                       const std::vector<std::string>& argv) {
  launch::check_train_job(options);  // a usage error costs no LibTorch start
  if (!options.launch.cluster.empty()) launch::refuse_cluster_set_flags(argv);
  hand_off(argv);
}

void run_commbench_command(const CLI::App&, CommbenchFlags&, const std::vector<std::string>& argv) {
  hand_off(argv);
}

void run_data_bench_command(const data::DataBenchOptions&, const std::vector<std::string>& argv) {
  hand_off(argv);
}

void add_models_command(CLI::App& app, const std::vector<std::string>& argv) {
  add_passed_through(app, "models", kModelsAbout, argv);
}

predict::BackwardProfile zoo_backward_profile(const std::string&, const models::ModelOptions&, double&,
                                              const std::vector<std::string>& argv) {
  hand_off(argv);
}

}  // namespace dlscale::cli
