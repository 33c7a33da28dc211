#pragma once
// One table per enum gives both directions of its text form and the
// "allowed: ..." list of its errors.
#include <array>
#include <string>
#include <utility>

#include "core/error.h"

namespace dlscale {

template <typename E, size_t N>
struct EnumNames {
  const char* what;  ///< how errors name the setting, e.g. "optimizer"
  std::array<std::pair<E, const char*>, N> entries;

  std::string allowed() const {
    std::string s;
    for (const auto& [value, name] : entries) s += (s.empty() ? "" : ", ") + std::string(name);
    return s;
  }
  /// The value named `name`; throws dlscale::Error listing the allowed names.
  E parse(const std::string& name) const {
    for (const auto& [value, text] : entries) {
      if (name == text) return value;
    }
    throw Error(fmt::format("unknown {} '{}'; allowed: {}", what, name, allowed()));
  }
  std::string name(E value) const {
    for (const auto& [v, text] : entries) {
      if (v == value) return text;
    }
    return "?";
  }
};

}  // namespace dlscale
