#pragma once
// Every numeric flag of every command is checked as text before CLI11
// converts it: an integer flag must hold an integer that fits 64 bits, a
// real one a finite number. Out-of-range input is then a one-line error
// naming the flag (exit 2), never a wrapped value, an overflow deep in
// LibTorch or an infinite timeout.
#include <CLI/CLI.hpp>
#include <string>

namespace dlscale::cli {

/// Adds the checks to every integer and real option of `app` and of all its
/// subcommands (call once, after every command is registered).
void check_number_flags(CLI::App& app);

/// The one-line message for CLI11's conversion error `what` ("Could not
/// convert: --iters = 100000000000"): past the checks above, only a whole
/// number too large for a 32-bit flag gets there, so that is what it says.
/// Other messages are returned as they are.
std::string explain_conversion_error(const std::string& what);

}  // namespace dlscale::cli
