#pragma once
// Elementwise sums on raw buffers, shared by the backends that need their own
// reduction function (Gloo and MPI have none for bfloat16).
#include <torch/torch.h>

#include <cstddef>

namespace dlscale::comm {

/// out[i] = a[i] + b[i] for `n` elements of `dtype` (float32, float16,
/// bfloat16; half types add in float32 and round once). `out` may alias `a`.
void sum_into(torch::ScalarType dtype, void* out, const void* a, const void* b, size_t n);

}  // namespace dlscale::comm
