#pragma once
// The CLI's visitor of option tables (core/option_table.h): each row of a
// table becomes a flag of a command, with its help, its default and its
// help group. Booleans are flags; enums take their names and are parsed
// here, at the edge (a wrong name is the enum's own one-line error), as are
// the words of a registry (Option::words).
#include <CLI/CLI.hpp>

#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/option_table.h"

namespace dlscale::cli {

template <typename T>
struct IsVector : std::false_type {};
template <typename T>
struct IsVector<std::vector<T>> : std::true_type {};

class OptionBinder {
 public:
  OptionBinder(CLI::App* command, std::string group) : command_(command), group_(std::move(group)) {}

  template <typename T>
  void operator()(const Option& o, T& value) const {
    CLI::Option* opt = add(o, value);
    if (!group_.empty()) opt->group(group_);  // CLI11 hides an option of group ""
  }

 private:
  template <typename T>
  CLI::Option* add(const Option& o, T& value) const {
    if constexpr (std::is_same_v<T, bool>) {
      return command_->add_flag(o.flags, value, o.help);
    } else if constexpr (std::is_enum_v<T>) {
      CLI::Option* opt = command_->add_option_function<std::string>(
          o.flags, [&value](const std::string& text) { value = enum_names(value).parse(text); }, o.help);
      opt->default_str(enum_names(value).name(value));
      return opt;
    } else {
      if constexpr (std::is_same_v<T, std::string>) {
        if (o.check_word != nullptr) return add_word(o, value);
      }
      CLI::Option* opt = command_->add_option(o.flags, value, o.help);
      if constexpr (IsVector<T>::value) opt->delimiter(',');
      if (o.show_default) opt->capture_default_str();
      return opt;
    }
  }

  /// A registry's word: checked as parsed, with the registry's own error.
  CLI::Option* add_word(const Option& o, std::string& value) const {
    const auto check = o.check_word;
    CLI::Option* opt = command_->add_option_function<std::string>(
        o.flags,
        [&value, check](const std::string& text) {
          check(text);
          value = text;
        },
        o.help);
    opt->default_str(value);
    return opt;
  }

  CLI::App* command_;
  std::string group_;
};

/// Registers every option of `options`' table on `command` in help group
/// `group` ("" = the command's general options); the values land in
/// `options` (which must outlive the parse).
template <typename Options>
void add_options(CLI::App* command, Options& options, const std::string& group) {
  Options::table(options, OptionBinder(command, group));
}

}  // namespace dlscale::cli
