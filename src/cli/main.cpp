// dlscale: measure, explain and predict how deep-learning training scales.
// Only this file turns exceptions into exit codes (docs/errors.md).
#include <c10/util/Exception.h>
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/numbers.h"
#include "core/build_info.h"
#include "core/error.h"
#include "launch/launch_env.h"
#include "launch/local_launcher.h"

namespace {

/// The first line of a (possibly multi-line) message: errors are one line.
std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

/// How this process was started, or nullopt when the environment is
/// malformed (the command reports that itself).
std::optional<dlscale::launch::LaunchEnv> launch_env() {
  try {
    return dlscale::launch::detect_launch_env([](const char* name) { return std::getenv(name); });
  } catch (const dlscale::Error&) {
    return std::nullopt;
  }
}

/// " (Slurm node N, step J.S)" for a task of srun, whose error line srun
/// gathers with every other task's: it says where the failing rank ran.
std::string slurm_suffix(const dlscale::launch::LaunchEnv& env) {
  if (env.kind != dlscale::launch::LaunchKind::kSrun || env.slurm.node_name.empty()) return "";
  return fmt::format(" (Slurm node {}, step {}.{})", env.slurm.node_name, env.slurm.job_id, env.slurm.step_id);
}

/// Prints the one-line error. A worker of dlscale's own launcher sends it
/// to the launcher instead, which prints one line for the whole job, naming
/// the cause (a rank whose peers gave up waiting on it, say).
int fail(int code, const std::string& message) {
  const std::optional<dlscale::launch::LaunchEnv> env = launch_env();
  // The progress pipe to dlscale's own launcher when this process is one of its workers.
  const int status_fd = env && env->kind == dlscale::launch::LaunchKind::kSpawned ? env->status_fd : -1;
  if (!dlscale::launch::StatusWriter(status_fd).write_error(first_line(message))) {
    std::fprintf(stderr, "dlscale: error: %s%s\n", first_line(message).c_str(),
                 env ? slurm_suffix(*env).c_str() : "");
  }
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv, argv + argc);
  CLI::App app{"dlscale: train models data-parallel and measure, explain and predict how "
               "training scales over many workers.",
               "dlscale"};
  app.set_version_flag("--version", "dlscale " + dlscale::build_info().version + " (" +
                                        dlscale::build_info().git_revision + ")");
  app.require_subcommand(1);
  app.footer("Run 'dlscale <command> --help' for the flags of one command.");
  dlscale::cli::add_models_command(app);
  dlscale::cli::add_train_command(app, args);
  dlscale::cli::add_commbench_command(app, args);
  dlscale::cli::add_sweep_command(app);
  dlscale::cli::add_results_command(app);
  dlscale::cli::add_report_command(app);
  dlscale::cli::add_data_command(app);
  dlscale::cli::add_cluster_command(app);
  dlscale::cli::add_predict_command(app, args);
  dlscale::cli::check_number_flags(app);

  if (argc == 1) {
    std::fputs(app.help().c_str(), stdout);
    return dlscale::kExitUsage;
  }
  // CLI11 reports an unknown command only as "A subcommand is required".
  if (const std::string first = argv[1]; !first.empty() && first[0] != '-') {
    std::string known;
    bool found = false;
    for (const CLI::App* sub : app.get_subcommands({})) {
      known += (known.empty() ? "" : ", ") + sub->get_name();
      found = found || sub->check_name(first);
    }
    if (!found) {
      return fail(dlscale::kExitUsage, "unknown command '" + first + "'; commands: " + known);
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --version
    return app.exit(e);
  } catch (const CLI::ConversionError& e) {
    return fail(dlscale::kExitUsage,
                dlscale::cli::explain_conversion_error(e.what()) + " (see 'dlscale --help')");
  } catch (const CLI::ParseError& e) {
    return fail(dlscale::kExitUsage, std::string(e.what()) + " (see 'dlscale --help')");
  } catch (const dlscale::cli::ExitWith& e) {
    return e.code;
  } catch (const dlscale::launch::JobFailed& e) {
    return fail(e.exit_code(), e.what());
  } catch (const dlscale::PeerFailure& e) {
    return fail(dlscale::kExitPeerFailure, e.what());
  } catch (const dlscale::IoError& e) {
    return fail(dlscale::kExitIo, e.what());
  } catch (const dlscale::Error& e) {
    return fail(dlscale::kExitUsage, e.what());
  } catch (const std::bad_alloc&) {
    return fail(dlscale::kExitOutOfMemory, "out of memory");
  } catch (const c10::Error& e) {
    const std::string msg = e.what_without_backtrace();
    const bool oom = msg.find("out of memory") != std::string::npos ||
                     msg.find("DefaultCPUAllocator: can't allocate") != std::string::npos;
    return fail(oom ? dlscale::kExitOutOfMemory : dlscale::kExitInternal, "LibTorch: " + msg);
  } catch (const std::exception& e) {
    return fail(dlscale::kExitInternal, e.what());
  }
  return dlscale::kExitOk;
}
