#include "slurm/hostlist.h"

#include <algorithm>
#include <cctype>

#include "core/error.h"

namespace dlscale::slurm {
namespace {

/// The numbers of one bracket's body ("1-3,07"), as zero-padded strings.
std::vector<std::string> expand_ranges(const std::string& list, const std::string& body) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (pos <= body.size()) {
    std::size_t comma = body.find(',', pos);
    if (comma == std::string::npos) comma = body.size();
    const std::string range = body.substr(pos, comma - pos);
    const std::size_t dash = range.find('-');
    const std::string lo = range.substr(0, dash);
    const std::string hi = dash == std::string::npos ? lo : range.substr(dash + 1);
    const auto is_number = [](const std::string& s) {
      return !s.empty() && s.size() <= 9 && std::all_of(s.begin(), s.end(), [](unsigned char c) {
        return std::isdigit(c) != 0;
      });
    };
    DLSCALE_CHECK(is_number(lo) && is_number(hi),
                  "host list '{}': '[{}]' holds '{}', not a number or a range lo-hi", list, body, range);
    const long a = std::stol(lo);
    const long b = std::stol(hi);
    DLSCALE_CHECK(a <= b, "host list '{}': range '{}' ends below its start", list, range);
    DLSCALE_CHECK(static_cast<std::size_t>(b - a) < kMaxHostlistHosts,
                  "host list '{}': range '{}' holds more than {} hosts", list, range, kMaxHostlistHosts);
    const int width = lo.size() > 1 && lo[0] == '0' ? static_cast<int>(lo.size()) : 0;
    for (long n = a; n <= b; ++n) out.push_back(fmt::format("{:0{}}", n, width));
    DLSCALE_CHECK(out.size() <= kMaxHostlistHosts, "host list '{}' holds more than {} hosts", list,
                  kMaxHostlistHosts);
    pos = comma + 1;
  }
  return out;
}

/// Appends every name of one entry ("rack[1-2]-n[01-04]") to `out`.
void expand_entry(const std::string& list, const std::string& entry, std::vector<std::string>& out) {
  std::vector<std::string> names = {""};
  std::size_t pos = 0;
  while (pos < entry.size()) {
    const std::size_t open = entry.find('[', pos);
    const std::string text = entry.substr(pos, open == std::string::npos ? std::string::npos : open - pos);
    DLSCALE_CHECK(text.find(']') == std::string::npos, "host list '{}': ']' without '['", list);
    for (std::string& n : names) n += text;
    if (open == std::string::npos) break;
    const std::size_t close = entry.find(']', open);
    DLSCALE_CHECK(close != std::string::npos, "host list '{}': '[' without ']'", list);
    const std::vector<std::string> numbers = expand_ranges(list, entry.substr(open + 1, close - open - 1));
    DLSCALE_CHECK(names.size() * numbers.size() + out.size() <= kMaxHostlistHosts,
                  "host list '{}' holds more than {} hosts", list, kMaxHostlistHosts);
    std::vector<std::string> next;
    next.reserve(names.size() * numbers.size());
    for (const std::string& n : names) {
      for (const std::string& k : numbers) next.push_back(n + k);
    }
    names = std::move(next);
    pos = close + 1;
  }
  out.insert(out.end(), names.begin(), names.end());
}

/// The entries of `list`: split at commas and spaces outside brackets.
std::vector<std::string> split_entries(const std::string& list) {
  std::vector<std::string> entries;
  std::string entry;
  int depth = 0;
  for (const char c : list) {
    if (c == '[') DLSCALE_CHECK(++depth == 1, "host list '{}': nested '['", list);
    if (c == ']') DLSCALE_CHECK(--depth == 0, "host list '{}': ']' without '['", list);
    if (depth == 0 && (c == ',' || std::isspace(static_cast<unsigned char>(c)))) {
      DLSCALE_CHECK(!entry.empty() || std::isspace(static_cast<unsigned char>(c)),
                    "host list '{}' has an empty entry", list);
      if (!entry.empty()) entries.push_back(entry);
      entry.clear();
      continue;
    }
    entry += c;
  }
  DLSCALE_CHECK(depth == 0, "host list '{}': '[' without ']'", list);
  if (!entry.empty()) entries.push_back(entry);
  DLSCALE_CHECK(!entries.empty(), "host list '{}' names no host", list);
  return entries;
}

}  // namespace

std::vector<std::string> expand_hostlist(const std::string& list) {
  std::vector<std::string> hosts;
  for (const std::string& entry : split_entries(list)) expand_entry(list, entry, hosts);
  return hosts;
}

std::string first_host(const std::string& list) {
  const std::vector<std::string> entries = split_entries(list);
  std::string entry = entries.front();
  // Only the first number of each bracket matters.
  for (std::size_t open = entry.find('['); open != std::string::npos; open = entry.find('[', open + 1)) {
    const std::size_t close = entry.find(']', open);
    DLSCALE_CHECK(close != std::string::npos, "host list '{}': '[' without ']'", list);
    const std::size_t end = entry.find_first_of(",-", open);
    const std::size_t stop = end != std::string::npos && end < close ? end : close;
    entry = entry.substr(0, open) + "[" + entry.substr(open + 1, stop - open - 1) + "]" + entry.substr(close + 1);
  }
  std::vector<std::string> one;
  expand_entry(list, entry, one);
  return one.front();
}

}  // namespace dlscale::slurm
