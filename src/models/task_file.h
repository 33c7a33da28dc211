#pragma once
// A task file (--task-file, docs/models.md "Your own model"): the task of a
// TorchScript module, declared in YAML. Either a built-in task by name, or
// the module's inputs and target as named tensors, its loss, its metrics
// and its throughput unit. Torch-free: it is parsed (and fuzzed) without
// LibTorch; libtorch/models/script_model.cpp turns it into a Task.
#include <cstdint>
#include <string>
#include <vector>

namespace dlscale::models {

/// One named tensor of a sample, as the file writes it (batch dimension left out).
struct TensorDecl {
  std::string name;
  std::string dtype = "float32";  ///< float32, float64, int64, int32
  std::vector<int64_t> shape;     ///< after the batch dimension; [] for one value a sample
  int64_t low = 0;                ///< integer IDs: values in [low, high)
  int64_t high = 0;
};

/// The losses a declared task can take.
enum class LossKind { kCrossEntropy, kBceWithLogits, kMse };

struct TaskDecl {
  /// A built-in task (image-classification, translation, recommendation),
  /// or "" when the file declares inputs, target, loss and metrics itself.
  std::string builtin;
  std::string name = "declared";  ///< the task's name in records and listings
  /// image-classification: input channels and height = width (0: --image-size or 224).
  int64_t channels = 3;
  int64_t image_size = 0;
  /// translation: tokens per sequence (0: --seq-len or 128); its vocabulary
  /// is the module's output's last size.
  int64_t seq_len = 0;
  /// recommendation: user and item IDs are in [0, users) and [0, items).
  int64_t users = 0;
  int64_t items = 0;
  std::vector<TensorDecl> inputs;  ///< in the order forward() takes them (or by name)
  TensorDecl target;               ///< what the loss compares the output with
  LossKind loss = LossKind::kCrossEntropy;
  double label_smoothing = 0;        ///< cross-entropy and translation only
  std::vector<std::string> metrics;  ///< top1, top5 (cross-entropy); accuracy (bce); mse
  std::string unit = "samples";      ///< what throughput counts
  int64_t items_per_sample = 1;
};

/// A loss's name as a task file writes it: cross-entropy, bce-with-logits, mse.
std::string loss_name(LossKind loss);

/// The metrics a loss allows, for errors and --help.
std::string metrics_of(LossKind loss);

/// Parses a task file's text; `path` names it in errors. Throws
/// dlscale::Error with one line naming the file, the line and what is
/// wrong: unknown keys, bad types, out-of-range values, a metric the loss
/// cannot give, a cross-entropy target that is not an integer class.
TaskDecl parse_task_file(const std::string& text, const std::string& path);

/// Reads and parses `path` (at most 1 MiB).
TaskDecl read_task_file(const std::string& path);

}  // namespace dlscale::models
