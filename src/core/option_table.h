#pragma once
// Options described once (docs/architecture.md, "Options"). Each options
// struct lists its fields in one table, a static template
//
//   template <typename Self, typename Visitor>
//   static void table(Self& self, Visitor&& v) {
//     v(Option{"--lr", "Learning rate", "lr"}.agreed(), self.lr);
//     ...
//   }
//
// and every consumer is a visitor over it: the CLI registers a flag with its
// help (cli/option_binding.h), the record writes each value under its key
// (record_inputs below), the workers compare the agreed ones at start
// (agreed_inputs), and a sweep takes every flag's long name as a parameter
// (cli/cmd_sweep.cpp asks the registered command). Adding an option is one row here and its
// use. Enums are parsed once, at the CLI edge, by their EnumNames table
// (core/enum_names.h), which `enum_names(E{})` must find by argument-
// dependent lookup; the record holds their names. No CLI11, no LibTorch.
#include <nlohmann/json.hpp>
#include <string>
#include <type_traits>

#include "core/record_keys.h"

namespace dlscale {

/// One option of a table.
struct Option {
  const char* flags;      ///< as CLI11 spells it: "--threads,-t"; "!--no-x" for a flag that clears
  std::string help;
  const char* key;        ///< its key in a record's inputs; nullptr = not recorded
  bool is_agreed = false; ///< every rank must run with the same value (checked at start)
  bool show_default = true;
  /// A text option whose values are a registry's words: throws
  /// dlscale::Error naming a value that is none of them (at parse time).
  void (*check_word)(const std::string&) = nullptr;

  /// Every rank of a job must be given the same value.
  Option agreed() const {
    Option o = *this;
    o.is_agreed = true;
    return o;
  }
  /// Values are checked by `check` when parsed (a registry's words).
  Option words(void (*check)(const std::string&)) const {
    Option o = *this;
    o.check_word = check;
    return o;
  }
  /// --help shows no default (a path, an optional value).
  Option no_default() const {
    Option o = *this;
    o.show_default = false;
    return o;
  }
};

template <typename T, typename = void>
struct HasEnumNames : std::false_type {};
template <typename T>
struct HasEnumNames<T, std::void_t<decltype(enum_names(T{}))>> : std::true_type {};

/// A value as a record holds it: an enum by its name.
template <typename T>
nlohmann::json option_json(const T& value) {
  if constexpr (std::is_enum_v<T>) {
    static_assert(HasEnumNames<T>::value, "an enum option needs enum_names(E) in its namespace");
    return enum_names(value).name(value);
  } else {
    return value;
  }
}

/// Writes every recorded option of `options` (a struct with a table) into
/// `out` under its key.
template <typename Options>
void record_inputs(const Options& options, nlohmann::json& out) {
  Options::table(options, [&out](const Option& o, const auto& value) {
    if (o.key != nullptr) out[o.key] = option_json(value);
  });
}

/// Writes the agreed options of `options` into `out` (what every rank of a
/// job compares at start).
template <typename Options>
void agreed_inputs(const Options& options, nlohmann::json& out) {
  Options::table(options, [&out](const Option& o, const auto& value) {
    if (o.is_agreed && o.key != nullptr) out[o.key] = option_json(value);
  });
}

}  // namespace dlscale
