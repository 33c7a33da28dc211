#pragma once
// --amp, the mixed-precision mode (libtorch/train/amp.h does the work); torch-free.
#include <string>

#include "core/enum_names.h"

namespace dlscale::train {

enum class AmpMode { kNone, kBf16, kFp16 };
const EnumNames<AmpMode, 3>& enum_names(AmpMode);
/// "none" | "bf16" | "fp16"; throws dlscale::Error otherwise.
AmpMode parse_amp(const std::string& name);
std::string to_string(AmpMode mode);

}  // namespace dlscale::train
