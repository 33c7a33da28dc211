// dlscale-torch: dlscale with LibTorch. `dlscale` hands it the commands that
// train or benchmark (cli/torch_commands.h); it runs every command itself.
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "libtorch/cli/torch_entry.h"

int main(int argc, char** argv) {
  const int code = dlscale::cli::torch_main(argc, argv);
  // The command's work is done: its files are written whole and closed
  // (core/files.h), its workers and communicators (MPI's finalize among
  // them) are gone with its scope. What exit() would add is LibTorch's
  // static destructors, which deregister every operator: about 90 ms of CPU
  // for nothing, a tenth of a start (bench/README.md). So the process ends
  // here, its streams flushed, as its forked workers do.
  std::cout.flush();
  std::fflush(nullptr);
  std::_Exit(code);
}
