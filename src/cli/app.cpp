// The command line of both executables (cli/app.h). Only this file turns
// exceptions into exit codes (docs/errors.md).
#include "cli/app.h"

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
#include "core/log.h"
#include "launch/launch_env.h"
#include "launch/local_launcher.h"

namespace dlscale::cli {
namespace {

/// The first line of a (possibly multi-line) message: errors are one line.
std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

/// How this process was started, or nullopt when the environment is
/// malformed (the command reports that itself).
std::optional<launch::LaunchEnv> launch_env() {
  try {
    return launch::detect_launch_env([](const char* name) { return std::getenv(name); });
  } catch (const Error&) {
    return std::nullopt;
  }
}

/// " (Slurm node N, step J.S)" for a task of srun, whose error line srun
/// gathers with every other task's: it says where the failing rank ran.
std::string slurm_suffix(const launch::LaunchEnv& env) {
  if (env.kind != launch::LaunchKind::kSrun || env.slurm.node_name.empty()) return "";
  return fmt::format(" (Slurm node {}, step {}.{})", env.slurm.node_name, env.slurm.job_id, env.slurm.step_id);
}

/// Prints the one-line error. A worker of dlscale's own launcher sends it
/// to the launcher instead, which prints one line for the whole job, naming
/// the cause (a rank whose peers gave up waiting on it, say).
int fail(int code, const std::string& message) {
  const std::optional<launch::LaunchEnv> env = launch_env();
  // The progress pipe to dlscale's own launcher when this process is one of its workers.
  const int status_fd = env && env->kind == launch::LaunchKind::kSpawned ? env->status_fd : -1;
  if (!launch::StatusWriter(status_fd).write_error(first_line(message))) {
    std::fprintf(stderr, "dlscale: error: %s%s\n", first_line(message).c_str(),
                 env ? slurm_suffix(*env).c_str() : "");
  }
  return code;
}

/// Every command of both executables, with the top-level flags.
void add_commands(CLI::App& app, const std::vector<std::string>& args) {
  app.set_version_flag("--version", "dlscale " + build_info().version + " (" + build_info().git_revision + ")");
  app.require_subcommand(1);
  app.footer("Run 'dlscale <command> --help' for the flags of one command.");
  add_models_command(app, args);
  add_train_command(app, args);
  add_commbench_command(app, args);
  add_sweep_command(app);
  add_results_command(app);
  add_report_command(app);
  add_data_command(app, args);
  add_cluster_command(app);
  add_predict_command(app, args);
  check_number_flags(app);
}

/// CLI11 reports an unknown command only as "A subcommand is required":
/// names it and the known ones instead ("" when `first` is known).
std::string unknown_command(const CLI::App& app, const std::string& first) {
  if (first.empty() || first[0] == '-') return "";
  std::string known;
  bool found = false;
  for (const CLI::App* sub : app.get_subcommands({})) {
    known += (known.empty() ? "" : ", ") + sub->get_name();
    found = found || sub->check_name(first);
  }
  return found ? "" : "unknown command '" + first + "'; commands: " + known;
}

}  // namespace

int run_cli(int argc, char** argv, const ErrorClassifier& classify) {
  const std::vector<std::string> args(argv, argv + argc);
  CLI::App app{"dlscale: train models data-parallel and measure, explain and predict how "
               "training scales over many workers.",
               "dlscale"};
  add_commands(app, args);
  if (const std::string bad = log_level_environment_error(); !bad.empty())
    return fail(kExitUsage, bad);
  if (argc == 1) {
    std::fputs(app.help().c_str(), stdout);
    return kExitUsage;
  }
  if (const std::string unknown = unknown_command(app, argv[1]); !unknown.empty()) {
    return fail(kExitUsage, unknown);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --version
    return app.exit(e);
  } catch (const CLI::ConversionError& e) {
    return fail(kExitUsage, explain_conversion_error(e.what()) + " (see 'dlscale --help')");
  } catch (const CLI::ParseError& e) {
    return fail(kExitUsage, std::string(e.what()) + " (see 'dlscale --help')");
  } catch (const ExitWith& e) {
    return e.code;
  } catch (const launch::JobFailed& e) {
    return fail(e.exit_code(), e.what());
  } catch (const PeerFailure& e) {
    return fail(kExitPeerFailure, e.what());
  } catch (const IoError& e) {
    return fail(kExitIo, e.what());
  } catch (const Error& e) {
    return fail(kExitUsage, e.what());
  } catch (const std::bad_alloc&) {
    return fail(kExitOutOfMemory, "out of memory");
  } catch (const std::exception& e) {
    if (classify) {
      if (const std::optional<ExitError> known = classify(e)) return fail(known->code, known->message);
    }
    return fail(kExitInternal, e.what());
  }
  return kExitOk;
}

}  // namespace dlscale::cli
