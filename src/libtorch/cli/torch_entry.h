#pragma once
// dlscale-torch's entry, as a function: its main() calls it, and a process
// that has LibTorch loaded already can run a command line without executing
// the binary (the tests' forks, tests/process_util.h).

namespace dlscale::cli {

/// Runs one dlscale-torch command line (argv[0] included) and returns its
/// exit code; local workers forked from this process run it again.
int torch_main(int argc, char** argv);

}  // namespace dlscale::cli
