#pragma once
// Multiply-accumulates counted from the operators a forward pass runs
// (ATen's RecordFunction observers), for models whose layers cannot count
// themselves: a TorchScript module (libtorch/models/script_model.h). Each outermost
// convolution, linear layer, matrix product or recurrent layer adds its
// MACs from its operands' and result's shapes; the operators it is built
// from are not counted again.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace dlscale::models {

struct OpCount {
  int64_t macs = 0;
  /// Each counted operator's MACs with the storages of its tensor operands
  /// (lists included), in the order they ran: what predict's backward
  /// profile charges to each parameter (libtorch/predict/zoo_profile.cpp).
  struct OpMacs {
    std::vector<const void*> operands;
    int64_t macs = 0;
  };
  std::vector<OpMacs> ops;
  /// Operators that do arithmetic on weights or products but are not
  /// counted (e.g. "aten::einsum x2"): the count is too low by theirs.
  std::vector<std::string> uncounted;
};

/// Runs `forward` on this thread and counts the MACs of the operators it
/// runs (convolutions, transposed convolutions, linear, addmm, mm, matmul,
/// bmm, baddbmm, mv, addmv, dot, LSTM, GRU, RNN).
OpCount count_op_macs(const std::function<void()>& forward);

}  // namespace dlscale::models
