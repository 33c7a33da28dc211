#pragma once
#include <chrono>
#include <cstdint>
#include <string>

namespace dlscale {

/// Seconds on the monotonic clock (only differences are meaningful).
inline double now_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

/// Wall-clock milliseconds since the Unix epoch at a now_seconds() reading
/// (now, by default).
inline int64_t wall_ms_at(double steady_seconds = now_seconds()) {
  using namespace std::chrono;
  const auto wall_now = duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
  return wall_now - static_cast<int64_t>((now_seconds() - steady_seconds) * 1e3);
}

/// Wall-clock time as an ISO-8601 UTC string with milliseconds.
std::string utc_timestamp();

}  // namespace dlscale
