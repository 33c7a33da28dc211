#pragma once
// Each subcommand registers its flags on the app and a callback that calls
// one library function. Errors propagate as exceptions to main().
#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace dlscale::cli {

void add_models_command(CLI::App& app);
void add_train_command(CLI::App& app, const std::vector<std::string>& argv);

}  // namespace dlscale::cli
