#include "core/memory.h"

#include <fstream>
#include <sstream>
#include <string>

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

namespace dlscale {

int64_t peak_resident_bytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) != 0) continue;
    std::istringstream fields(line.substr(6));
    int64_t kib = -1;
    std::string unit;
    fields >> kib >> unit;
    return kib >= 0 && unit == "kB" ? kib * 1024 : -1;
  }
  return -1;
}

}  // namespace dlscale
