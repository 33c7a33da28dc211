#pragma once

#include <cstdint>

namespace dlscale {

/// Makes glibc malloc keep freed memory for reuse instead of handing large
/// blocks back to the OS. By default every buffer above the mmap threshold
/// (128 KiB, raised dynamically up to 32 MiB) is mmap'ed and munmap'ed, so a
/// training step page-faults and zero-fills its activations again each time
/// (~10% of a LeNet step on CPU). Process-wide; call once before training.
void keep_freed_memory();

/// The process's peak resident set so far (VmHWM of /proc/self/status), in
/// bytes; -1 where it cannot be read.
int64_t peak_resident_bytes();

}  // namespace dlscale
