#include "libtorch/models/op_count.h"

#include <ATen/record_function.h>
#include <fmt/format.h>

#include <map>
#include <string_view>

#include "core/error.h"

namespace dlscale::models {

namespace {

enum class Op {
  kNone,
  kConv,
  kConvTranspose,
  kConvMaybeTransposed,
  kLinear,
  kMatrix,
  kAddMatrix,
  kMatmul,
  kDot,
  kRecurrent
};

/// How an operator's MACs are counted, by its name.
Op op_of(std::string_view name) {
  static const std::map<std::string_view, Op> ops = {
      {"aten::conv1d", Op::kConv},
      {"aten::conv2d", Op::kConv},
      {"aten::conv3d", Op::kConv},
      {"aten::convolution", Op::kConvMaybeTransposed},
      {"aten::_convolution", Op::kConvMaybeTransposed},
      {"aten::conv_transpose1d", Op::kConvTranspose},
      {"aten::conv_transpose2d", Op::kConvTranspose},
      {"aten::conv_transpose3d", Op::kConvTranspose},
      {"aten::linear", Op::kLinear},
      {"aten::addmm", Op::kAddMatrix},
      {"aten::mm", Op::kMatrix},
      {"aten::bmm", Op::kMatrix},
      {"aten::baddbmm", Op::kAddMatrix},
      {"aten::mv", Op::kMatrix},
      {"aten::addmv", Op::kAddMatrix},
      {"aten::_addmm_activation",
       Op::kAddMatrix},  // linear + ReLU/GELU (the encoder layer's fast path)
      {"aten::matmul", Op::kMatmul},
      {"aten::dot", Op::kDot},
      {"aten::lstm", Op::kRecurrent},
      {"aten::gru", Op::kRecurrent},
      {"aten::rnn_tanh", Op::kRecurrent},
      {"aten::rnn_relu", Op::kRecurrent},
  };
  const auto it = ops.find(name);
  return it == ops.end() ? Op::kNone : it->second;
}

/// Operators that compute on weights, are not counted, and are not built
/// from counted ones: naming them says the count is too low.
bool uncounted_op(std::string_view name) {
  return name == "aten::_trilinear" || name == "aten::conv_tbc" ||
         name == "aten::cudnn_convolution" || name == "aten::_nnpack_spatial_convolution" ||
         name == "aten::fbgemm_linear_fp16_weight";
}

struct State {
  int depth = 0;  ///< counted operators open on this thread
  /// The outermost counted operator's inputs, copied when it starts: ATen
  /// keeps them valid only during the start callbacks.
  std::vector<c10::IValue> inputs;
  OpCount count;
  std::map<std::string, int> uncounted;
};

thread_local State* t_state = nullptr;

torch::Tensor tensor_at(const std::vector<c10::IValue>& values, size_t i) {
  return i < values.size() && values[i].isTensor() ? values[i].toTensor() : torch::Tensor();
}

int64_t per_output(const torch::Tensor& w) { return w.size(0) == 0 ? 0 : w.numel() / w.size(0); }

/// The MACs of one outermost counted operator.
int64_t macs_of(Op op, const std::vector<c10::IValue>& in, const std::vector<c10::IValue>& out) {
  const torch::Tensor a = tensor_at(in, 0);
  const torch::Tensor result = tensor_at(out, 0);
  if (!a.defined() || !result.defined()) return 0;
  switch (op) {
    case Op::kConvMaybeTransposed:
      if (in.size() > 6 && in[6].isBool() && in[6].toBool())
        return a.numel() * per_output(tensor_at(in, 1));
      return result.numel() * per_output(tensor_at(in, 1));
    case Op::kConv:
      return result.numel() * per_output(tensor_at(in, 1));
    case Op::kConvTranspose:
      return a.numel() * per_output(tensor_at(in, 1));
    case Op::kLinear: {
      const torch::Tensor w = tensor_at(in, 1);
      return w.defined() && w.dim() == 2 ? result.numel() * w.size(1) : 0;
    }
    case Op::kMatrix:
    case Op::kAddMatrix: {
      // addmm, baddbmm and addmv take the added tensor first.
      const torch::Tensor m = tensor_at(in, op == Op::kAddMatrix ? 1 : 0);
      return m.defined() && m.dim() >= 2 ? result.numel() * m.size(-1) : 0;
    }
    case Op::kMatmul:
      return a.dim() == 1 && result.dim() == 0 ? a.numel() : result.numel() * a.size(-1);
    case Op::kDot:
      return a.numel();
    case Op::kRecurrent: {
      // Every weight matrix acts once per token: the tokens times their sizes.
      const int64_t tokens = a.dim() == 0 || a.size(-1) == 0 ? 0 : a.numel() / a.size(-1);
      int64_t weights = 0;
      for (const auto& v : in) {
        if (!v.isTensorList()) continue;
        for (const torch::Tensor& p : v.toTensorVector()) weights += p.dim() == 2 ? p.numel() : 0;
      }
      return tokens * weights;
    }
    case Op::kNone:
      break;
  }
  return 0;
}

std::unique_ptr<at::ObserverContext> on_enter(const at::RecordFunction& fn) {
  State* s = t_state;
  if (s == nullptr) return nullptr;
  const std::string_view name = fn.name();
  if (op_of(name) != Op::kNone) {
    if (s->depth++ == 0) s->inputs.assign(fn.inputs().begin(), fn.inputs().end());
  } else if (s->depth == 0 && uncounted_op(name)) {
    ++s->uncounted[std::string(name)];
  }
  return nullptr;
}

void on_exit(const at::RecordFunction& fn, at::ObserverContext*) {
  State* s = t_state;
  if (s == nullptr) return;
  const Op op = op_of(fn.name());
  if (op == Op::kNone || --s->depth > 0) return;
  OpCount::OpMacs counted;
  counted.macs = macs_of(op, s->inputs, fn.outputs());
  for (const auto& v : s->inputs) {
    if (v.isTensor() && v.toTensor().has_storage()) {
      counted.operands.push_back(v.toTensor().storage().unsafeGetStorageImpl());
    } else if (v.isTensorList()) {
      for (const torch::Tensor& t : v.toTensorVector())
        if (t.has_storage()) counted.operands.push_back(t.storage().unsafeGetStorageImpl());
    }
  }
  s->count.macs += counted.macs;
  s->count.ops.push_back(std::move(counted));
  s->inputs.clear();
}

}  // namespace

OpCount count_op_macs(const std::function<void()>& forward) {
  State state;
  DLSCALE_ASSERT(t_state == nullptr);
  t_state = &state;
  const at::CallbackHandle handle = at::addThreadLocalCallback(
      at::RecordFunctionCallback(on_enter, on_exit).needsInputs(true).needsOutputs(true));
  try {
    forward();
  } catch (...) {
    at::removeCallback(handle);
    t_state = nullptr;
    throw;
  }
  at::removeCallback(handle);
  t_state = nullptr;
  for (const auto& [name, times] : state.uncounted) {
    state.count.uncounted.push_back(times > 1 ? fmt::format("{} x{}", name, times) : name);
  }
  return state.count;
}

}  // namespace dlscale::models
