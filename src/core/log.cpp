#include "core/log.h"

#include "core/clock.h"

#include <unistd.h>

#include <string>

namespace dlscale {
namespace {

struct ThreadLogState {
  int rank = 0;
  int world = 1;
  LogLevel level = LogLevel::kInfo;
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
