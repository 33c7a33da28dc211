#pragma once
// What the sequence-to-sequence models (transformer, gnmt) and their task
// (seq2seq_task.cpp) share: the names of the tensors and the special tokens.
#include <torch/torch.h>

#include <cstdint>

namespace dlscale::models {

inline constexpr const char* kSourceTokens = "src";    ///< [batch, length] source token IDs
inline constexpr const char* kTargetIn = "tgt_in";     ///< the target shifted right: what the decoder reads
inline constexpr const char* kTargetTokens = "tgt";    ///< [batch, length] target token IDs
inline constexpr int64_t kPadToken = 0;
inline constexpr int64_t kBeginToken = 1;  ///< begins every decoder input
inline constexpr int64_t kFirstWord = 2;   ///< tokens [kFirstWord, vocab) are words

/// The decoder's input for target `tgt` ([..., length]): kBeginToken, then
/// tgt without its last token.
torch::Tensor shift_right(const torch::Tensor& tgt);

}  // namespace dlscale::models
