#pragma once
// Turns a sweep file into the list of runs: the cartesian product of the
// variables over the parameters, computed values resolved, extensions
// applied in order, and the per-worker / global batch derived from the
// scaling mode (docs/sweep-files.md).
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "sweep/params.h"
#include "sweep/sweep_file.h"

namespace dlscale::sweep {

struct PlanOptions {
  /// Options `dlscale train` accepts (long names without "--"); a run of kind
  /// dlscale naming anything else is an error. Empty = not checked.
  std::set<std::string> train_options;
  /// The same for `dlscale commbench` and runs of kind commbench.
  std::set<std::string> commbench_options;
};

/// One planned run. After planning, `params` always holds kind, launcher,
/// scaling, workers, repeats and timeout, and, except for kind commbench
/// (which has no batch), batch (per worker) and global-batch.
struct PlannedRun {
  int index = 0;            ///< 1-based position in the plan
  Params params;
  std::string key;          ///< run_key(params)
  std::string skip_reason;  ///< non-empty: not run, and why
  bool skipped() const { return !skip_reason.empty(); }
};

/// Plans every run; throws dlscale::Error naming the parameter for unknown
/// names, cycles, bad values and bad expressions.
std::vector<PlannedRun> plan_sweep(const SweepSpec& spec, const PlanOptions& options);

/// The position of the ')' closing the '(' at `open`, skipping quoted text
/// ('…' and "…"); npos when there is none. Finds the end of `$( expr )`.
std::size_t closing_paren(const std::string& text, std::size_t open);

/// Expands `${name}` and `$( expr )` in `text` against `lookup`. Text that is
/// one reference or one expression keeps the value's type; otherwise the
/// pieces are joined as text.
Value expand_template(const std::string& text, const Lookup& lookup);

/// The plan as a table (`--dry-run`): the columns that vary between runs,
/// repeats, and why a run is skipped.
void print_plan(std::ostream& out, const std::vector<PlannedRun>& plan);

/// The pattern an external run's throughput is read with when none is given.
inline constexpr const char* kDefaultThroughputPattern =
    R"(([0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?)\s*samples/s)";

/// Checks an external run's 'throughput-pattern' (RE2 syntax: matching
/// takes time linear in the text, whatever the pattern); throws
/// dlscale::Error when it is not a valid regular expression or has no
/// (group) for the number. The planner calls it, so a bad pattern fails
/// before any run.
void check_throughput_pattern(const std::string& pattern);

/// The first group of the last match of `pattern` in `text`; "" when nothing
/// matches. Throws like check_throughput_pattern for a bad pattern.
std::string last_throughput_match(const std::string& pattern, const std::string& text);

}  // namespace dlscale::sweep
