#pragma once
// A tensor type's name as records and flags spell it (NumPy's names).
#include <torch/torch.h>

#include <string>

namespace dlscale {

/// "float32", "bfloat16", "int64", ...; LibTorch's own name for the others.
inline std::string dtype_name(torch::ScalarType t) {
  switch (t) {
    case torch::kFloat32: return "float32";
    case torch::kFloat16: return "float16";
    case torch::kBFloat16: return "bfloat16";
    case torch::kFloat64: return "float64";
    case torch::kInt64: return "int64";
    case torch::kInt32: return "int32";
    default: return c10::toString(t);
  }
}

}  // namespace dlscale
