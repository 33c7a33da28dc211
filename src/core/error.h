#pragma once
// Two kinds of failure (docs/errors.md):
//  - dlscale::Error: the user asked for something impossible or gave bad input.
//    The message names the bad value and what is allowed; main() exits with 2.
//  - dlscale::InternalError: a broken invariant inside dlscale (a bug); exit 1.
#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace dlscale {

/// A user-facing error: bad input or an impossible request. Exit code 2.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A violated internal invariant (a dlscale bug). Exit code 1.
class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

/// Exit codes used by main(); documented in docs/errors.md.
inline constexpr int kExitOk = 0;
inline constexpr int kExitInternal = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitOutOfMemory = 3;
inline constexpr int kExitRunsFailed = 4;  ///< a sweep finished, but some runs failed

}  // namespace dlscale

/// Throws dlscale::Error with a fmt-formatted message when `cond` is false.
#define DLSCALE_CHECK(cond, ...)                              \
  do {                                                        \
    if (!(cond)) throw ::dlscale::Error(fmt::format(__VA_ARGS__)); \
  } while (0)

/// Internal invariant; throws InternalError naming the source location.
#define DLSCALE_ASSERT(cond)                                                           \
  do {                                                                                 \
    if (!(cond))                                                                       \
      throw ::dlscale::InternalError(                                                  \
          fmt::format("internal error: {} ({}:{})", #cond, __FILE__, __LINE__));       \
  } while (0)
