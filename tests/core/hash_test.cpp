// core/hash.h: buffer_checksum tells equal buffers from unequal ones, a
// difference in any word, bit or tail byte included.
#include "core/hash.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <utility>
#include <vector>

namespace {

using dlscale::buffer_checksum;

std::vector<unsigned char> pattern(size_t n) {
  std::vector<unsigned char> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<unsigned char>((i * 131 + 7) % 251);
  return b;
}

TEST(BufferChecksum, EqualBuffersAgreeAndAnyFlippedBitDiffers) {
  for (const size_t n : {size_t{0}, size_t{5}, size_t{32}, size_t{37}, size_t{1000}}) {
    SCOPED_TRACE(n);
    const std::vector<unsigned char> a = pattern(n);
    std::vector<unsigned char> b = a;
    const uint64_t sum = buffer_checksum(a.data(), a.size());
    EXPECT_EQ(buffer_checksum(b.data(), b.size()), sum);
    for (size_t byte = 0; byte < n; ++byte) {
      for (const unsigned char bit : {0x01, 0x80}) {  // a float's lowest mantissa bit, a sign bit
        b[byte] ^= bit;
        EXPECT_NE(buffer_checksum(b.data(), b.size()), sum) << "byte " << byte;
        b[byte] ^= bit;
      }
    }
  }
}

// A piece's checksum continues from the pieces before it (the trainer
// chains every parameter's), so equal pieces after different ones differ.
TEST(BufferChecksum, ContinuesFromThePiecesBefore) {
  const std::vector<unsigned char> a = pattern(100);
  const uint64_t first = buffer_checksum(a.data(), 40);
  EXPECT_NE(buffer_checksum(a.data() + 40, 60, first), buffer_checksum(a.data() + 40, 60));
  // Two words swapped: the lanes see them in other orders.
  std::vector<unsigned char> swapped = a;
  for (int i = 0; i < 8; ++i) std::swap(swapped[i], swapped[8 + i]);
  EXPECT_NE(buffer_checksum(swapped.data(), swapped.size()), buffer_checksum(a.data(), a.size()));
  // The same words over 32 bytes, once as a lone buffer and once as a tail.
  EXPECT_NE(buffer_checksum(a.data(), 32), buffer_checksum(a.data(), 33));
}

}  // namespace
