#pragma once
// Two kinds of failure (docs/errors.md):
//  - dlscale::Error: the user asked for something impossible or gave bad input.
//    The message names the bad value and what is allowed; main() exits with 2.
//  - dlscale::PeerFailure (an Error): a worker or the network failed; exit 5.
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

/// A peer or network failure: a rank died, a connection closed, or a
/// collective timed out. Exit code 5 (docs/errors.md): not the user's input.
class PeerFailure : public Error {
 public:
  using Error::Error;
};

/// Writing failed for want of space or a failing device (ENOSPC, EDQUOT,
/// EIO, or SQLite's "database or disk is full"). Exit code 6: not the user's
/// input, and not a peer's failure.
class IoError : public Error {
 public:
  using Error::Error;
};

/// Throws IoError for errno values that mean the storage failed (no space,
/// quota, device error), dlscale::Error otherwise: "cannot write 'PATH': why".
[[noreturn]] void throw_write_error(const std::string& path, int err);

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
inline constexpr int kExitPeerFailure = 5; ///< a worker died or stalled, or a collective failed
inline constexpr int kExitIo = 6;          ///< no space left, or the storage device failed

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
