#include "sweep/params.h"

#include <algorithm>
#include <cmath>

#include "core/text.h"
#include "core/error.h"

namespace dlscale::sweep {

bool is_train_option(const std::string& name) {
  if (name.empty() || name[0] == '_' || name == "workers" || name == "batch" || name == "global-batch") return false;
  return std::find(std::begin(kSweepOnlyParams), std::end(kSweepOnlyParams), name) == std::end(kSweepOnlyParams);
}

nlohmann::json to_json(const Value& v) {
  if (v.is_bool()) return v.boolean();
  if (v.is_string()) return v.string();
  if (v.is_list()) {
    nlohmann::json a = nlohmann::json::array();
    for (const Value& item : v.list()) a.push_back(to_json(item));
    return a;
  }
  const double d = v.number();
  if (std::floor(d) == d && std::fabs(d) < 9e15) return static_cast<long long>(d);
  return d;
}

nlohmann::json to_json(const Params& p) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [name, value] : p) j[name] = to_json(value);
  return j;
}

namespace {
Value value_from_json(const nlohmann::json& j) {
  if (j.is_boolean()) return Value(j.get<bool>());
  if (j.is_number()) return Value(j.get<double>());
  if (j.is_string()) return Value(j.get<std::string>());
  if (j.is_array()) {
    Value::List items;
    for (const auto& item : j) items.push_back(value_from_json(item));
    return Value(items);
  }
  throw Error("stored run parameters hold a value that is not a number, text, boolean or list");
}
}  // namespace

Params params_from_json(const nlohmann::json& j) {
  DLSCALE_CHECK(j.is_object(), "stored run parameters are not a JSON object");
  Params p;
  for (const auto& [name, value] : j.items()) p[name] = value_from_json(value);
  return p;
}

std::string run_key(const Params& p) {
  Params identity = p;
  identity.erase("repeats");
  identity.erase("timeout");
  // Invalid UTF-8 (from a value an expression cut in two) must not throw here.
  return dump_json(to_json(identity));
}

std::vector<std::string> varying_params(const std::vector<const Params*>& runs, const std::set<std::string>& exclude) {
  std::set<std::string> names;
  for (const Params* p : runs) {
    for (const auto& [name, unused] : *p) names.insert(name);
  }
  std::vector<std::string> out;
  for (const std::string& name : names) {
    if (exclude.count(name)) continue;
    for (const Params* p : runs) {
      if (param_text(*p, name, "-") != param_text(*runs.front(), name, "-")) {
        out.push_back(name);
        break;
      }
    }
  }
  return out;
}

Value param_or(const Params& p, const std::string& name, const Value& fallback) {
  const auto it = p.find(name);
  return it == p.end() ? fallback : it->second;
}

long long param_int(const Params& p, const std::string& name) {
  const auto it = p.find(name);
  DLSCALE_CHECK(it != p.end(), "parameter '{}' is not set", name);
  const Value& v = it->second;
  // Beyond 2^53 a double no longer holds every whole number.
  DLSCALE_CHECK(v.is_number() && std::floor(v.number()) == v.number() &&
                    std::fabs(v.number()) <= 9007199254740992.0,
                "parameter '{}' must be a whole number of at most 2^53 (got '{}')", name,
                v.to_string());
  return static_cast<long long>(v.number());
}

std::string param_text(const Params& p, const std::string& name, const std::string& fallback) {
  const auto it = p.find(name);
  return it == p.end() ? fallback : it->second.to_string();
}

}  // namespace dlscale::sweep
