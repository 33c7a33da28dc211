#pragma once
#include <chrono>
#include <string>

namespace dlscale {

/// Seconds on the monotonic clock (only differences are meaningful).
inline double now_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

/// Wall-clock time as an ISO-8601 UTC string with milliseconds.
std::string utc_timestamp();

}  // namespace dlscale
