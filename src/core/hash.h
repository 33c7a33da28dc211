#pragma once
// FNV-1a, 64-bit: a fast, stable hash for checksums and short keys; and a
// faster checksum of large buffers, for comparing them only. Neither is for
// security.
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace dlscale {

inline constexpr uint64_t kFnv1aOffset = 1469598103934665603ull;

/// FNV-1a of `n` bytes at `data`, continuing from `h` (chain calls to hash
/// several pieces as one).
inline uint64_t fnv1a(const void* data, size_t n, uint64_t h = kFnv1aOffset) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ bytes[i]) * 1099511628211ull;
  return h;
}

/// Whether two large buffers are (barring a 2^-64 collision) equal, at
/// memory speed: FNV-1a's step over 8-byte words in four independent lanes,
/// where fnv1a() multiplies once a byte in one chain (about 1 GB/s; a
/// model's parameters are hundreds of MB). Each step is a bijection of its
/// lane and of its word, so buffers that differ in one word always differ
/// here. Its value may change between versions: compare it only within a
/// run (the replicas of a job, libtorch/train/trainer_gather.cpp); what is
/// stored uses fnv1a().
inline uint64_t buffer_checksum(const void* data, size_t n, uint64_t h = kFnv1aOffset) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  uint64_t lanes[4] = {h, h + 1, h + 2, h + 3};
  size_t i = 0;
  for (; i + sizeof lanes <= n; i += sizeof lanes) {
    for (int k = 0; k < 4; ++k) {
      uint64_t word = 0;
      std::memcpy(&word, bytes + i + k * sizeof word, sizeof word);
      lanes[k] = (lanes[k] ^ word) * 1099511628211ull;
    }
  }
  return fnv1a(bytes + i, n - i, fnv1a(lanes, sizeof lanes));
}

}  // namespace dlscale
