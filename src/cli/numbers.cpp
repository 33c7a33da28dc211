#include "cli/numbers.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>

#include <fmt/format.h>
#include <string>

namespace dlscale::cli {
namespace {

std::string check_integer(const std::string& text, bool is_unsigned) {
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  std::from_chars_result r{};
  if (is_unsigned) {
    uint64_t v = 0;
    r = std::from_chars(begin, end, v);
  } else {
    int64_t v = 0;
    r = std::from_chars(begin, end, v);
  }
  if (r.ec == std::errc::result_out_of_range) {
    return "'" + text + "' is out of range for a 64-bit integer";
  }
  if (r.ec != std::errc() || r.ptr != end) {
    return "'" + text + "' is not " + (is_unsigned ? "a non-negative integer" : "an integer");
  }
  return "";
}

std::string check_real(const std::string& text) {
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0') return "'" + text + "' is not a number";
  if (!std::isfinite(v) || errno == ERANGE) return "'" + text + "' is not a finite number";
  return "";
}

void add_checks(CLI::App& app) {
  for (CLI::Option* opt : app.get_options()) {
    const std::string type = opt->get_type_name();
    if (type == "INT" || type == "UINT") {
      const bool is_unsigned = type == "UINT";
      opt->check(CLI::Validator(
          [is_unsigned](std::string& s) { return check_integer(s, is_unsigned); }, "", "INTEGER"));
    } else if (type == "FLOAT") {
      opt->check(CLI::Validator([](std::string& s) { return check_real(s); }, "", "FINITE"));
    }
  }
  for (CLI::App* sub : app.get_subcommands({})) add_checks(*sub);
}

}  // namespace

void check_number_flags(CLI::App& app) { add_checks(app); }

std::string explain_conversion_error(const std::string& what) {
  const std::string prefix = "Could not convert: ";
  const size_t eq = what.find(" = ");
  if (what.rfind(prefix, 0) != 0 || eq == std::string::npos) return what;
  const std::string flag = what.substr(prefix.size(), eq - prefix.size());
  const std::string value = what.substr(eq + 3);
  if (!check_integer(value, false).empty()) return what;
  const bool negative = !value.empty() && value[0] == '-';
  return fmt::format("{}: '{}' is out of range; this flag takes whole numbers {} {}", flag, value,
                     negative ? "from" : "up to",
                     negative ? std::numeric_limits<int32_t>::min() : std::numeric_limits<int32_t>::max());
}

}  // namespace dlscale::cli
