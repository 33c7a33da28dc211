// dlscale-torch: dlscale with LibTorch. `dlscale` hands it the commands that
// train or benchmark (cli/torch_commands.h); it runs every command itself.
#include "libtorch/cli/torch_entry.h"

int main(int argc, char** argv) { return dlscale::cli::torch_main(argc, argv); }
