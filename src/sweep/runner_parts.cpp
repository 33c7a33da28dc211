#include "sweep/runner_parts.h"

#include <signal.h>

#include <algorithm>
#include <cctype>
#include <cerrno>

#include "core/error.h"
#include "core/hash.h"

namespace dlscale::sweep::detail {

std::string format_duration(double s) {
  if (s < 0) return "?";
  const long long t = static_cast<long long>(s + 0.5);
  if (t >= 3600) return fmt::format("{}h{:02}m", t / 3600, (t % 3600) / 60);
  if (t >= 60) return fmt::format("{}m{:02}s", t / 60, t % 60);
  return fmt::format("{}s", t);
}

std::string describe(const PlannedRun& run) {
  const Params& p = run.params;
  if (param_text(p, "kind") == "commbench") {
    return fmt::format("commbench w{} {}", param_text(p, "workers"), param_text(p, "op", "allreduce"));
  }
  std::string s = fmt::format("{} {} w{} b{}", param_text(p, "model", param_text(p, "kind")),
                              param_text(p, "scaling"), param_text(p, "workers"), param_text(p, "batch"));
  for (const char* name : {"strategy", "compress"}) {
    if (p.count(name)) s += " " + param_text(p, name);
  }
  for (const auto& [name, value] : p) {
    if (name[0] == '_' && !value.is_list()) s += " " + value.to_string();
  }
  return s;
}

Headline headline(const Params& p) {
  if (param_text(p, "kind") == "commbench") return {"busbw_gbps_peak", "GB/s peak busbw", 3};
  return {"samples_per_sec", "samples/s", 1};
}

std::string failure_detail(const std::string& log) {
  std::string last;
  std::string error_line;
  std::size_t start = 0;
  while (start < log.size()) {
    std::size_t end = log.find('\n', start);
    if (end == std::string::npos) end = log.size();
    std::string line = log.substr(start, end - start);
    start = end + 1;
    // Blank lines and rules ("-----" around mpirun's reports) say nothing.
    if (std::none_of(line.begin(), line.end(), [](unsigned char c) { return std::isalnum(c); })) continue;
    if (const std::size_t at = line.find("dlscale: error: "); at != std::string::npos) {
      error_line = line.substr(at + 16);
    }
    last = line;
  }
  std::string detail = error_line.empty() ? last : error_line;
  if (detail.size() > 300) detail = detail.substr(0, 300) + "...";
  return detail;
}

bool mentions_out_of_memory(const std::string& log) {
  std::string lower = log;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  return lower.find("out of memory") != std::string::npos;
}

bool ran_out_of_memory(const Params& p, int exit_code, int signal, const std::string& log) {
  return param_text(p, "kind") == "dlscale" && signal == 0 ? exit_code == kExitOutOfMemory
                                                           : mentions_out_of_memory(log);
}

bool process_alive(long long pid) { return pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM); }

std::string short_hash(const std::string& s) {
  return fmt::format("{:016x}", fnv1a(s.data(), s.size())).substr(0, 10);
}

}  // namespace dlscale::sweep::detail
