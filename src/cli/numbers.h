#pragma once
// Every numeric flag of every command is checked as text before CLI11
// converts it: an integer flag must hold an integer that fits 64 bits, a
// real one a finite number. Out-of-range input is then a one-line error
// naming the flag (exit 2), never a wrapped value, an overflow deep in
// LibTorch or an infinite timeout.
#include <CLI/CLI.hpp>

namespace dlscale::cli {

/// Adds the checks to every integer and real option of `app` and of all its
/// subcommands (call once, after every command is registered).
void check_number_flags(CLI::App& app);

}  // namespace dlscale::cli
