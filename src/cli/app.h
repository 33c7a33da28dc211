#pragma once
// The command line shared by dlscale (torch-free) and dlscale-torch: every
// command registered, parsed and run, and every error turned into one line
// and an exit code (docs/errors.md). The executables differ in how the
// commands that need LibTorch run (cli/torch_commands.h) and in the errors
// only LibTorch throws.
#include <exception>
#include <functional>
#include <optional>
#include <string>

namespace dlscale::cli {

/// An error's exit code and one-line message.
struct ExitError {
  int code;
  std::string message;
};
/// Names an exception the shared handlers do not know (LibTorch's, in
/// dlscale-torch); nullopt for any other, which is an internal error.
using ErrorClassifier = std::function<std::optional<ExitError>(const std::exception&)>;

/// Runs the command line; returns the exit code.
int run_cli(int argc, char** argv, const ErrorClassifier& classify);

}  // namespace dlscale::cli
