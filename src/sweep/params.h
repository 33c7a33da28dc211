#pragma once
// The resolved parameters of one run: what the planner produces, the runner
// executes, the store keeps (as JSON) and reports group by.
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "sweep/expression.h"

namespace dlscale::sweep {

/// Sorted by name, so that the JSON form (and the run key) is canonical.
using Params = std::map<std::string, Value>;

/// Parameters that steer the sweep itself rather than the program it runs.
/// `repeats` and `timeout` do not change what is measured, so they are not
/// part of a run's identity (run_key).
/// (`train-timeout` is passed to `dlscale train` as its `--timeout`, the
/// collective timeout, since a sweep's `timeout` is the per-repeat limit.)
inline constexpr const char* kSweepOnlyParams[] = {
    "kind",        "launcher",           "launcher-args", "repeats", "timeout",   "scaling",
    "command",     "throughput-pattern", "train-timeout", "hosts",   "link-mbit", "rack-hosts",
    "uplink-mbit", "cluster-launcher",   "max-jobs",      "tcp-cc"};

/// True for parameters a dlscale run passes to `dlscale train` as `--name`:
/// not the sweep's own, not a `_name` of the user's, and not workers/batch/
/// global-batch, which the runner passes in the launcher's and scaling's form.
bool is_train_option(const std::string& name);

nlohmann::json to_json(const Value& v);
nlohmann::json to_json(const Params& p);
Params params_from_json(const nlohmann::json& j);

/// The identity of a run: canonical JSON of its parameters without
/// `repeats` and `timeout`. Resume looks runs up by this key.
std::string run_key(const Params& p);

/// The names, sorted, of the parameters whose text differs among `runs`
/// (an absent one reads "-"), other than those in `exclude`: the columns a
/// plan or a report must show to tell runs apart.
std::vector<std::string> varying_params(const std::vector<const Params*>& runs, const std::set<std::string>& exclude);

/// The parameter's value, or `fallback` when absent.
Value param_or(const Params& p, const std::string& name, const Value& fallback);
/// The parameter as a whole number; throws dlscale::Error naming it otherwise.
long long param_int(const Params& p, const std::string& name);
/// The parameter as text (numbers and booleans in their text form).
std::string param_text(const Params& p, const std::string& name, const std::string& fallback = "");

}  // namespace dlscale::sweep
