#include "core/memory.h"

#include <malloc.h>

namespace dlscale {

void keep_freed_memory() {
  // Serve every allocation from the heap (no per-allocation mmap) and never
  // trim it: activations freed at the end of a step are reused by the next.
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_TOP_PAD, 64 << 20);
}

}  // namespace dlscale
