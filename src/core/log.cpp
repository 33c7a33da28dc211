#include "core/log.h"

#include <unistd.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "core/clock.h"

namespace dlscale {
namespace {

std::string log_level_variable() {
  const char* given = std::getenv("DLSCALE_LOG_LEVEL");
  return given != nullptr ? given : "";
}

std::optional<LogLevel> parse_log_level(const std::string& value) {
  if (value.empty() || value == "info") return LogLevel::kInfo;
  if (value == "debug") return LogLevel::kDebug;
  if (value == "warn") return LogLevel::kWarn;
  if (value == "error") return LogLevel::kError;
  return std::nullopt;
}

/// DLSCALE_LOG_LEVEL, read once per process; info when unset or invalid
/// (the front refuses an invalid one: log_level_environment_error).
LogLevel level_from_environment() {
  static const LogLevel level = parse_log_level(log_level_variable()).value_or(LogLevel::kInfo);
  return level;
}

struct ThreadLogState {
  int rank = 0;
  int world = 1;
  LogLevel level = level_from_environment();
};

ThreadLogState& state() {
  thread_local ThreadLogState s;
  return s;
}

const char* level_name(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return "D";
    case LogLevel::kInfo: return "I";
    case LogLevel::kWarn: return "W";
    case LogLevel::kError: return "E";
  }
  return "?";
}

}  // namespace

void log_set_rank(int rank, int world_size) {
  state().rank = rank;
  state().world = world_size;
}

void log_set_level(LogLevel level) { state().level = level; }

std::string log_level_environment_error() {
  const std::string value = log_level_variable();
  if (parse_log_level(value)) return "";
  return "DLSCALE_LOG_LEVEL='" + value + "' must be debug, info, warn or error";
}

bool log_enabled(LogLevel level) { return level >= state().level; }

void log_write(LogLevel level, std::string_view message) {
  std::string line = fmt::format("{} {} [rank {}/{}] {}\n", utc_timestamp(), level_name(level),
                                 state().rank, state().world, message);
  // One write() per line keeps lines from different threads/processes whole.
  const char* p = line.data();
  size_t left = line.size();
  while (left > 0) {
    const ssize_t n = ::write(STDERR_FILENO, p, left);
    if (n <= 0) break;
    p += n;
    left -= static_cast<size_t>(n);
  }
}

ScopedLogRank::ScopedLogRank(int rank, int world_size)
    : prev_rank_(state().rank), prev_world_(state().world) {
  log_set_rank(rank, world_size);
}

ScopedLogRank::~ScopedLogRank() { log_set_rank(prev_rank_, prev_world_); }

}  // namespace dlscale
