#pragma once
// A sweep file (docs/sweep-files.md) read from YAML into typed structs. The
// planner (planner.h) turns it into runs; nothing here evaluates anything.
#include <string>
#include <utility>
#include <vector>

#include "sweep/expression.h"

namespace dlscale::sweep {

/// A value as written: a literal, or text holding `${name}` / `$( expr )`
/// that the planner computes per run.
struct RawValue {
  Value literal;
  std::string text;        ///< the template, when is_template
  bool is_template = false;
};

using RawParams = std::vector<std::pair<std::string, RawValue>>;

/// `{when: {param: value-or-list}, set: {...}}` or `{when: ..., skip: true}`.
/// `when` may also be one expression string, e.g. "$( ${workers} > 4 )".
struct Extension {
  int index = 0;  ///< 1-based position in the file, for messages
  std::vector<std::pair<std::string, std::vector<Value>>> when;
  RawValue when_expression;  ///< used when `when` is a string
  bool has_when_expression = false;
  RawParams set;
  bool skip = false;
  std::string description;   ///< "when model=lenet, workers=[2, 4]" for skip reasons
};

struct SweepSpec {
  std::string name;  ///< `name:` or the file's stem
  std::string path;
  RawParams parameters;
  std::vector<std::pair<std::string, std::vector<RawValue>>> variables;
  std::vector<Extension> extensions;
};

/// Throws dlscale::Error unless `name` can name the sweep's directory of
/// run logs and records (DIR/<name>/): 1 to 128 bytes, no '/', not '.' or
/// '..'. A sweep file's `name:` must never lead outside --output-dir.
void check_sweep_name(const std::string& name);

/// Parses YAML text; `path` names the file in errors. Throws dlscale::Error
/// with one line naming the file, line and what is wrong.
SweepSpec parse_sweep(const std::string& yaml_text, const std::string& path);
/// Reads and parses a sweep file.
SweepSpec load_sweep_file(const std::string& path);

}  // namespace dlscale::sweep
