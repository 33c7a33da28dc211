#include "libtorch/comm/reduce_kernels.h"

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include "core/error.h"

namespace dlscale::comm {
namespace {

template <typename T>
void sum_typed(void* out, const void* a, const void* b, size_t n) {
  auto* o = static_cast<T*>(out);
  const auto* x = static_cast<const T*>(a);
  const auto* y = static_cast<const T*>(b);
  for (size_t i = 0; i < n; ++i) o[i] = static_cast<T>(static_cast<float>(x[i]) + static_cast<float>(y[i]));
}

}  // namespace

void sum_into(torch::ScalarType dtype, void* out, const void* a, const void* b, size_t n) {
  switch (dtype) {
    case torch::kFloat32: {
      auto* o = static_cast<float*>(out);
      const auto* x = static_cast<const float*>(a);
      const auto* y = static_cast<const float*>(b);
      for (size_t i = 0; i < n; ++i) o[i] = x[i] + y[i];
      return;
    }
    case torch::kFloat16: return sum_typed<c10::Half>(out, a, b, n);
    case torch::kBFloat16: return sum_typed<c10::BFloat16>(out, a, b, n);
    default: throw InternalError("sum_into: unsupported dtype");
  }
}

}  // namespace dlscale::comm
