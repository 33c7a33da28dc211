#pragma once

namespace dlscale {

/// Makes glibc malloc keep freed memory for reuse instead of handing large
/// blocks back to the OS. By default every buffer above the mmap threshold
/// (128 KiB, raised dynamically up to 32 MiB) is mmap'ed and munmap'ed, so a
/// training step page-faults and zero-fills its activations again each time
/// (~10% of a LeNet step on CPU). Process-wide; call once before training.
void keep_freed_memory();

}  // namespace dlscale
