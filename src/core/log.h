#pragma once
// One logging macro family. Every line carries a UTC timestamp and the rank tag
// "[rank r/w]", and goes to stderr (stdout is kept for tables and results).
// The rank tag is per thread, so ranks run as threads in tests tag correctly.
#include <fmt/format.h>

#include <string>
#include <string_view>

namespace dlscale {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

/// Sets the rank tag of the calling thread (default "rank 0/1").
void log_set_rank(int rank, int world_size);
/// Sets the minimum level printed by the calling thread (default: the
/// environment's DLSCALE_LOG_LEVEL, debug|info|warn|error, or kInfo).
void log_set_level(LogLevel level);
/// "" when DLSCALE_LOG_LEVEL is unset or valid; otherwise one line naming
/// it (the front exits 2 with it).
std::string log_level_environment_error();
/// True when `level` would be printed by the calling thread.
bool log_enabled(LogLevel level);
/// Writes one tagged line to stderr; thread-safe (one write per line).
void log_write(LogLevel level, std::string_view message);

/// Restores the previous rank tag on scope exit (for ranks run as threads).
class ScopedLogRank {
 public:
  ScopedLogRank(int rank, int world_size);
  ~ScopedLogRank();
  ScopedLogRank(const ScopedLogRank&) = delete;
  ScopedLogRank& operator=(const ScopedLogRank&) = delete;

 private:
  int prev_rank_;
  int prev_world_;
};

}  // namespace dlscale

#define DLSCALE_LOG(level, ...)                                         \
  do {                                                                  \
    if (::dlscale::log_enabled(level))                                  \
      ::dlscale::log_write(level, fmt::format(__VA_ARGS__));            \
  } while (0)
#define DLSCALE_LOG_DEBUG(...) DLSCALE_LOG(::dlscale::LogLevel::kDebug, __VA_ARGS__)
#define DLSCALE_LOG_INFO(...) DLSCALE_LOG(::dlscale::LogLevel::kInfo, __VA_ARGS__)
#define DLSCALE_LOG_WARN(...) DLSCALE_LOG(::dlscale::LogLevel::kWarn, __VA_ARGS__)
#define DLSCALE_LOG_ERROR(...) DLSCALE_LOG(::dlscale::LogLevel::kError, __VA_ARGS__)
