#pragma once
// FNV-1a, 64-bit: a fast, stable hash for checksums and short keys (not
// for security).
#include <cstddef>
#include <cstdint>

namespace dlscale {

inline constexpr uint64_t kFnv1aOffset = 1469598103934665603ull;

/// FNV-1a of `n` bytes at `data`, continuing from `h` (chain calls to hash
/// several pieces as one).
inline uint64_t fnv1a(const void* data, size_t n, uint64_t h = kFnv1aOffset) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ bytes[i]) * 1099511628211ull;
  return h;
}

}  // namespace dlscale
