// dlscale: measure, explain and predict how deep-learning training scales.
// This executable loads no LibTorch: reports, results, sweeps, data tools and
// clusters and predictions start at once; train, commbench, data bench,
// models and a zoo model's FLOP profile are handed over to dlscale-torch
// (cli/torch_commands.h).
#include "cli/app.h"

int main(int argc, char** argv) { return dlscale::cli::run_cli(argc, argv, nullptr); }
