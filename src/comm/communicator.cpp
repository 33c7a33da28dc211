#include "comm/communicator.h"

#include "core/error.h"

namespace dlscale::comm {

void check_comm_tensor(const torch::Tensor& t, const char* op, bool reducible) {
  DLSCALE_CHECK(t.defined(), "{}: tensor is undefined", op);
  DLSCALE_CHECK(t.device().is_cpu(), "{}: tensor is on {}, this backend needs CPU tensors", op,
                t.device().str());
  DLSCALE_CHECK(t.is_contiguous(), "{}: tensor must be contiguous", op);
  if (reducible) {
    const auto d = t.scalar_type();
    DLSCALE_CHECK(d == torch::kFloat32 || d == torch::kFloat16 || d == torch::kBFloat16,
                  "{}: dtype {} cannot be reduced; allowed: float32, float16, bfloat16", op,
                  c10::toString(d));
  }
}

}  // namespace dlscale::comm
