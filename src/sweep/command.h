#pragma once
// The command line of one repeat of a planned run (docs/sweep-files.md):
// `dlscale train|commbench ...` under the run's launcher, or an external
// command with its ${parameters} filled in.
#include <string>
#include <vector>

#include "sweep/planner.h"

namespace dlscale::sweep {

/// The parameters of repeat `repeat` (1-based) of a run. A dlscale run that
/// evaluates (target-accuracy, epochs, eval-every or eval-every-steps) takes
/// a new seed for each repeat, as MLPerf's runs of one benchmark differ in
/// seed: repeat k of seed s (train's default 42 when unset) runs seed
/// s + 1000·(k − 1), clear of a small seed list swept as a variable. Other
/// runs repeat exactly (timing noise is what their repeats measure).
Params repeat_params(const Params& params, int repeat);
inline constexpr long long kDefaultSeed = 42;  ///< train's --seed default

/// The argv of one repeat: `dlscale train …` (possibly under mpirun/srun)
/// or the external command with `${param}` substituted. `record_path` is
/// where a dlscale run writes its JSON record.
std::vector<std::string> build_command(const Params& params, const std::string& dlscale_binary,
                                       const std::string& record_path);

/// Splits a command template into words like a shell would (spaces, '…',
/// "…", backslash) without running one.
std::vector<std::string> split_command(const std::string& text);

}  // namespace dlscale::sweep
