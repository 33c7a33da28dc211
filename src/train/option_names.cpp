// The names of the train options' enums (train/train_options.h,
// train/amp_mode.h): torch-free, so that the front executable parses
// `dlscale train` without LibTorch (docs/architecture.md, "Two executables").
#include "core/enum_names.h"
#include "train/amp_mode.h"
#include "train/train_options.h"

namespace dlscale::train {
namespace {

constexpr EnumNames<OptimizerKind, 5> kOptimizers{
    "optimizer",
    {{{OptimizerKind::kSgd, "sgd"},
      {OptimizerKind::kMomentum, "momentum"},
      {OptimizerKind::kNesterov, "nesterov"},
      {OptimizerKind::kAdam, "adam"},
      {OptimizerKind::kLars, "lars"}}}};
constexpr EnumNames<MemoryFormat, 2> kMemoryFormats{
    "memory format",
    {{{MemoryFormat::kChannelsLast, "channels-last"}, {MemoryFormat::kContiguous, "contiguous"}}}};
constexpr EnumNames<AmpMode, 3> kAmpModes{
    "--amp", {{{AmpMode::kNone, "none"}, {AmpMode::kBf16, "bf16"}, {AmpMode::kFp16, "fp16"}}}};

}  // namespace

const EnumNames<OptimizerKind, 5>& enum_names(OptimizerKind) { return kOptimizers; }
std::string to_string(OptimizerKind kind) { return kOptimizers.name(kind); }
const EnumNames<MemoryFormat, 2>& enum_names(MemoryFormat) { return kMemoryFormats; }
std::string to_string(MemoryFormat format) { return kMemoryFormats.name(format); }
const EnumNames<AmpMode, 3>& enum_names(AmpMode) { return kAmpModes; }
AmpMode parse_amp(const std::string& name) { return kAmpModes.parse(name); }
std::string to_string(AmpMode mode) { return kAmpModes.name(mode); }

}  // namespace dlscale::train
