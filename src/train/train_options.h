#pragma once
// Everything `dlscale train` can be asked, parsed once at the edge into this
// struct and validated by resolve_train_options() before any work starts.
#include <cstdint>
#include <string>

namespace dlscale::train {

enum class OptimizerKind { kSgd, kMomentum, kNesterov, kAdam };

/// Layout of 4-D activations and weights. oneDNN's CPU convolutions run
/// faster on channels-last (NHWC) tensors; see docs/metrics.md.
enum class MemoryFormat { kChannelsLast, kContiguous };

/// "sgd" | "momentum" | "nesterov" | "adam"; throws dlscale::Error otherwise.
OptimizerKind parse_optimizer(const std::string& name);
std::string to_string(OptimizerKind kind);

/// "channels-last" | "contiguous"; throws dlscale::Error otherwise.
MemoryFormat parse_memory_format(const std::string& name);
std::string to_string(MemoryFormat format);

struct TrainOptions {
  std::string model = "resnet18";
  int64_t batch = 32;          ///< samples per step per worker
  int64_t steps = 20;          ///< total steps, including the warm-up steps
  int64_t warmup = 3;          ///< first steps excluded from the measurement
  int threads = 0;             ///< intra-op compute threads; 0 = every core this process may use
  int64_t image_size = 0;      ///< input height = width; 0 = the model's default
  int64_t num_classes = 0;     ///< 0 = the model's default
  bool aux_logits = false;     ///< train auxiliary classifiers too (googlenet, inception3)
  std::string optimizer = "sgd";
  double lr = 0.01;            ///< learning rate
  double momentum = 0.9;       ///< used by momentum and nesterov
  double weight_decay = 0.0;   ///< L2 penalty
  uint64_t seed = 42;          ///< model initialization and synthetic data
  int64_t display_every = 10;  ///< print a step line every this many steps; 0 = never
  int64_t synthetic_batches = 1;  ///< distinct synthetic batches cycled through
  std::string device = "cpu";  ///< "cpu" or "cuda[:index]"
  std::string memory_format = "channels-last";  ///< "channels-last" or "contiguous"
  bool keep_freed_memory = true;  ///< tune malloc to reuse freed activations (core/memory.h)
  std::string json_path;       ///< result record file; "" = none
};

/// Options after validation, with defaults filled in.
struct ResolvedTrainOptions {
  TrainOptions options;        ///< every 0/"" default replaced by its value
  OptimizerKind optimizer = OptimizerKind::kSgd;
  MemoryFormat memory_format = MemoryFormat::kChannelsLast;
  int64_t channels = 0;
  int64_t measured_steps = 0;
  int64_t global_batch = 0;
  int world_size = 1;
};

/// Validates every field and fills defaults. Throws dlscale::Error with a
/// one-line message naming the bad value and what is allowed. Also checks that
/// json_path can be written, so a long run never ends with a lost result.
ResolvedTrainOptions resolve_train_options(const TrainOptions& options);

/// Number of CPUs this process may run on.
int available_cores();

}  // namespace dlscale::train
