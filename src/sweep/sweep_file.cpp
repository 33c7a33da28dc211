#include "sweep/sweep_file.h"

#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <map>
#include <set>

#include "core/error.h"
#include "core/files.h"
#include "core/text.h"

namespace dlscale::sweep {
namespace {

std::string where(const std::string& path, const YAML::Node& node) {
  const YAML::Mark m = node.Mark();
  return m.line >= 0 ? fmt::format("{}:{}", path, m.line + 1) : path;
}

/// A YAML scalar as a Value: unquoted numbers and true/false keep their type;
/// quoted scalars are always text.
Value scalar_value(const YAML::Node& node, const std::string& path) {
  const std::string s = node.Scalar();
  // The file's bytes are checked (check_text); an escape such as "\n" in a
  // quoted scalar gets past that, and would end a line of a job script.
  DLSCALE_CHECK(!has_control(s) && is_utf8(s), "{}: the value '{}' holds a control character, or an escape that "
                "is not UTF-8 text", where(path, node), printable(s));
  if (node.Tag() == "!") return Value(s);
  if (s == "true" || s == "True") return Value(true);
  if (s == "false" || s == "False") return Value(false);
  if (!s.empty()) {
    try {
      std::size_t used = 0;
      const double d = std::stod(s, &used);
      if (used == s.size()) return Value(d);
    } catch (const std::exception&) {
    }
  }
  return Value(s);
}

bool has_template(const std::string& s) {
  return s.find("${") != std::string::npos || s.find("$(") != std::string::npos;
}

RawValue raw_value(const YAML::Node& node, const std::string& path, const std::string& what) {
  RawValue r;
  if (node.IsScalar()) {
    r.literal = scalar_value(node, path);
    if (r.literal.is_string() && has_template(r.literal.string())) {
      r.is_template = true;
      r.text = r.literal.string();
    }
    return r;
  }
  if (node.IsSequence()) {
    Value::List items;
    for (const YAML::Node& item : node) {
      DLSCALE_CHECK(item.IsScalar(), "{}: {} must be a value or a list of values", where(path, item), what);
      items.push_back(scalar_value(item, path));
    }
    r.literal = Value(items);
    return r;
  }
  DLSCALE_CHECK(!node.IsNull(), "{}: {} has no value", where(path, node), what);
  throw Error(fmt::format("{}: {} must be a value or a list of values, not a mapping", where(path, node), what));
}

void check_name(const std::string& name, const YAML::Node& node, const std::string& path) {
  DLSCALE_CHECK(!name.empty() && name.find_first_of(" ${}()\"'") == std::string::npos && !has_control(name) &&
                    is_utf8(name),
                "{}: '{}' is not a valid parameter name (letters, digits, '-' and '_')",
                where(path, node), printable(name));
}

RawParams param_map(const YAML::Node& node, const std::string& path, const std::string& section) {
  RawParams out;
  if (!node || node.IsNull()) return out;
  DLSCALE_CHECK(node.IsMap(), "{}: '{}' must be a mapping of name: value", where(path, node), section);
  std::set<std::string> seen;
  for (const auto& kv : node) {
    const std::string name = kv.first.Scalar();
    check_name(name, kv.first, path);
    DLSCALE_CHECK(seen.insert(name).second, "{}: '{}' appears twice in '{}'", where(path, kv.first), name, section);
    out.emplace_back(name, raw_value(kv.second, path, fmt::format("{} '{}'", section, name)));
  }
  return out;
}

Extension parse_extension(const YAML::Node& node, int index, const std::string& path) {
  Extension e;
  e.index = index;
  const std::string what = fmt::format("extension {}", index);
  DLSCALE_CHECK(node.IsMap(), "{}: {} must be a mapping with 'when' and 'set' or 'skip'", where(path, node), what);
  for (const auto& kv : node) {
    const std::string key = kv.first.Scalar();
    DLSCALE_CHECK(key == "when" || key == "set" || key == "skip",
                  "{}: {} has unknown key '{}' (allowed: when, set, skip)", where(path, kv.first), what, key);
  }
  const YAML::Node when = node["when"];
  DLSCALE_CHECK(when && !when.IsNull(), "{}: {} has no 'when'", where(path, node), what);
  if (when.IsScalar()) {
    e.when_expression = raw_value(when, path, what + " 'when'");
    e.has_when_expression = true;
    e.description = "when " + when.Scalar();
  } else {
    DLSCALE_CHECK(when.IsMap(), "{}: {} 'when' must map parameters to a value or a list", where(path, when), what);
    for (const auto& kv : when) {
      const std::string name = kv.first.Scalar();
      check_name(name, kv.first, path);
      const RawValue v = raw_value(kv.second, path, fmt::format("{} 'when' {}", what, name));
      DLSCALE_CHECK(!v.is_template, "{}: {} 'when' {}: use a list of values or a 'when' expression, not a template",
                    where(path, kv.second), what, name);
      std::vector<Value> allowed = v.literal.is_list() ? v.literal.list() : std::vector<Value>{v.literal};
      e.description += fmt::format("{}{}={}", e.description.empty() ? "when " : ", ", name, v.literal.to_string());
      e.when.emplace_back(name, std::move(allowed));
    }
  }
  if (const YAML::Node skip = node["skip"]) {
    DLSCALE_CHECK(skip.IsScalar() && scalar_value(skip, path).is_bool(), "{}: {} 'skip' must be true or false",
                  where(path, skip), what);
    e.skip = scalar_value(skip, path).boolean();
  }
  e.set = param_map(node["set"], path, what + " 'set'");
  DLSCALE_CHECK(e.skip || !e.set.empty(), "{}: {} needs 'set' or 'skip: true'", where(path, node), what);
  DLSCALE_CHECK(!(e.skip && !e.set.empty()), "{}: {} has both 'set' and 'skip'", where(path, node), what);
  return e;
}

}  // namespace

namespace {

/// Throws dlscale::Error naming the line of the first byte that is not part
/// of valid UTF-8, or of a control character (other than tab, CR and LF):
/// such bytes would reach terminals, logs and the results store verbatim.
void check_text(const std::string& text, const std::string& path) {
  int line = 1;
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\n') ++line;
    const size_t len = utf8_sequence_length(text, i);
    DLSCALE_CHECK(len > 0, "{}:{}: not valid UTF-8 text (byte 0x{:02x})", path, line, c);
    DLSCALE_CHECK(len > 1 || (c >= 0x20 && c != 0x7F) || c == '\t' || c == '\n' || c == '\r',
                  "{}:{}: control character 0x{:02x} in the file", path, line, c);
    i += len;
  }
}

}  // namespace

void check_sweep_name(const std::string& name) {
  // It names the directory of the run logs, Slurm's jobs and a comment line
  // of their scripts: nothing in it may end a line, start an option, climb
  // a directory or need quoting beyond a space.
  const bool safe_chars = name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                 "0123456789 ._-+=,@()") == std::string::npos;
  DLSCALE_CHECK(!name.empty() && name.size() <= 128 && safe_chars && name.front() != '-' && name.front() != '.' &&
                    name.front() != ' ' && name.back() != ' ',
                "sweep name '{}' must be 1 to 128 of letters, digits, spaces and . _ - + = , @ ( ), not starting "
                "with '.', '-' or a space (it names the directory of the sweep's run logs and its Slurm jobs)",
                printable(name));
}

SweepSpec parse_sweep(const std::string& yaml_text, const std::string& path) {
  check_text(yaml_text, path);
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    throw Error(fmt::format("{}:{}: not valid YAML: {}", path, e.mark.line + 1, e.msg));
  }
  DLSCALE_CHECK(root.IsMap(), "{}: a sweep file is a mapping with 'parameters', 'variables' and 'extensions'", path);
  SweepSpec spec;
  spec.path = path;
  spec.name = std::filesystem::path(path).stem().string();
  std::map<std::string, int> seen;  // top-level key -> its line
  for (const auto& kv : root) {
    const std::string key = kv.first.Scalar();
    const int line = kv.first.Mark().line + 1;
    if (const auto [it, fresh] = seen.emplace(key, line); !fresh) {
      throw Error(fmt::format("{}: '{}' appears twice (lines {} and {}); merge them", where(path, kv.first),
                              key, it->second, line));
    }
    if (key == "name") {
      DLSCALE_CHECK(kv.second.IsScalar() && !kv.second.Scalar().empty(), "{}: 'name' must be text", where(path, kv.second));
      spec.name = kv.second.Scalar();
      try {
        check_sweep_name(spec.name);
      } catch (const Error& e) {
        throw Error(fmt::format("{}: {}", where(path, kv.second), e.what()));
      }
    } else if (key == "parameters" || key == "scaling") {
      // Wherever 'scaling' stands, it joins the parameters; set twice, it is an error.
      auto added = key == "parameters" ? param_map(kv.second, path, "parameters")
                                       : decltype(spec.parameters){{"scaling", raw_value(kv.second, path, "scaling")}};
      for (auto& [name, value] : added) {
        for (const auto& [other, unused] : spec.parameters) {
          DLSCALE_CHECK(other != name, "{}: '{}' is set both at the top level and in 'parameters'",
                        where(path, kv.first), name);
        }
        spec.parameters.emplace_back(name, std::move(value));
      }
    } else if (key == "variables") {
      const YAML::Node& vars = kv.second;
      if (vars.IsNull()) continue;
      DLSCALE_CHECK(vars.IsMap(), "{}: 'variables' must map names to lists of values", where(path, vars));
      for (const auto& v : vars) {
        const std::string name = v.first.Scalar();
        check_name(name, v.first, path);
        std::vector<RawValue> values;
        if (v.second.IsSequence()) {
          for (const YAML::Node& item : v.second) {
            values.push_back(raw_value(item, path, fmt::format("variable '{}'", name)));
          }
        } else {
          values.push_back(raw_value(v.second, path, fmt::format("variable '{}'", name)));
        }
        DLSCALE_CHECK(!values.empty(), "{}: variable '{}' has an empty list", where(path, v.second), name);
        for (const auto& [other, unused] : spec.variables) {
          DLSCALE_CHECK(other != name, "{}: variable '{}' appears twice", where(path, v.first), name);
        }
        spec.variables.emplace_back(name, std::move(values));
      }
    } else if (key == "extensions") {
      const YAML::Node& exts = kv.second;
      if (exts.IsNull()) continue;
      DLSCALE_CHECK(exts.IsSequence(), "{}: 'extensions' must be a list of {{when, set|skip}} rules", where(path, exts));
      int index = 0;
      for (const YAML::Node& e : exts) spec.extensions.push_back(parse_extension(e, ++index, path));
    } else {
      throw Error(fmt::format("{}: unknown key '{}' (allowed: name, parameters, variables, extensions, scaling)",
                              where(path, kv.first), key));
    }
  }
  check_sweep_name(spec.name);  // also the file's stem
  return spec;
}

SweepSpec load_sweep_file(const std::string& path) {
  DLSCALE_CHECK(std::filesystem::is_regular_file(path), "sweep file '{}' does not exist", path);
  return parse_sweep(read_file(path), path);
}

}  // namespace dlscale::sweep
