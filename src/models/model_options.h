#pragma once
// Which model to build and how (`dlscale train`'s model flags), torch-free
// so that options can be parsed, recorded and compared without LibTorch.
#include <cstdint>
#include <string>

#include "core/option_table.h"

namespace dlscale::models {

/// Comma-separated list of the zoo's model names, for errors (libtorch/models/model.cpp:
/// the zoo needs LibTorch, so help texts name 'dlscale models' instead).
std::string known_model_names();

/// Whether `name` names a TorchScript file (libtorch/models/script_model.h) rather
/// than a model of the zoo: script:PATH, or a path ending in .pt or .pth.
inline bool is_script_model(const std::string& name) {
  const auto ends = [&](const std::string& tail) {
    return name.size() > tail.size() &&
           name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
  };
  return name.rfind("script:", 0) == 0 || ends(".pt") || ends(".pth");
}

/// How to build a model. Defaults come from the model's spec when 0.
struct ModelOptions {
  std::string name = "resnet18";  ///< a name of the zoo (libtorch/models/model.h), or a TorchScript file
  std::string
      task_file;  ///< a TorchScript model's task (models/task_file.h); "": image classification
  int64_t num_classes = 0;  ///< output classes; 0 = the model's default (10 or 1000)
  int64_t image_size = 0;   ///< input height = width in pixels; 0 = the model's default
  bool aux_logits = false;  ///< build auxiliary classifiers (googlenet, inception3 only)
  double dropout = -1;      ///< dropout probability for every dropout layer; < 0 = the model's own
  int64_t vocab = 0;        ///< token vocabulary (sequence models); 0 = the model's default
  int64_t seq_len = 0;      ///< tokens per source and per target sequence; 0 = the model's default
  int64_t min_seq_len = 0;  ///< synthetic batches' shortest length (one a batch); 0 = seq_len
  double ambiguity =
      0;  ///< synthetic translation: each target word's chance of its second translation
  int64_t hidden = 0;       ///< hidden size (gnmt's LSTMs, the transformer's d_model); 0 = the model's default
  int64_t rois =
      0;  ///< RoIs sampled per image for the box head (maskrcnn); 0 = the model's default
  int64_t backbone_batch =
      0;  ///< images a backbone pass takes together (maskrcnn); 0 = the model's default
  bool sparse_embeddings = false;  ///< ncf: the embedding tables' gradients are sparse (libtorch/dp/sparse_sync.h)

  /// The options' table (core/option_table.h).
  template <typename Self, typename Visitor>
  static void table(Self& s, Visitor&& v) {
    v(Option{"--model,-m",
             "Model to train: a name of the zoo ('dlscale models' lists them), or your own "
             "TorchScript module, "
             "PATH.pt or script:PATH (docs/models.md, 'Your own model')",
             record::input::kModel}
          .agreed(),
      s.name);
    v(Option{"--task-file",
             "A TorchScript model's task, in YAML: 'task: image-classification' (the default "
             "without this flag) "
             "or its inputs, target, loss, metrics and unit (docs/models.md)",
             "task_file"}
          .agreed(),
      s.task_file);
    v(Option{"--image-size", "Input height = width in pixels; 0 = the model's default (see 'dlscale models')",
             "image_size"}
          .agreed(),
      s.image_size);
    v(Option{"--classes",
             "Output classes of a classifier, or of a detector with its background (ssd300: 81); "
             "0 = the model's default",
             "num_classes"}
          .agreed(),
      s.num_classes);
    v(Option{"--aux-logits", "Build and train the auxiliary classifiers (googlenet, inception3)", "aux_logits"}
          .agreed(),
      s.aux_logits);
    v(Option{"--dropout",
             "Probability of every dropout layer; negative = the model's own (0 disables dropout, which "
             "makes N-worker runs comparable to one worker step for step)",
             "dropout"}
          .agreed(),
      s.dropout);
    sequence_table(s, v);
    v(Option{"--rois",
             "maskrcnn: RoIs sampled per image for the box head, at most a quarter of them "
             "positive and through the mask head (the reference's 512); fewer make a CPU-sized "
             "step; 0 = the model's default",
             "rois"}
          .agreed(),
      s.rois);
    v(Option{"--backbone-batch",
             "maskrcnn: images the backbone, FPN and RPN take together in one pass (the "
             "reference's 2 a GPU); a worker's batch goes through in passes of this many, the "
             "last one shorter. N workers match one worker on the global batch when each "
             "worker's batch is a multiple of it; 0 = the model's default (2)",
             "backbone_batch"}
          .agreed(),
      s.backbone_batch);
    v(Option{"--sparse-embeddings",
             "ncf: the embedding tables' gradients hold only the rows a batch looked up, and travel as "
             "(indices, values) gathered from every worker instead of a dense allreduce of the tables "
             "(allreduce, tree, hierarchical, independent)",
             "sparse_embeddings"}
          .agreed(),
      s.sparse_embeddings);
  }

  /// The sequence models' flags of table().
  template <typename Self, typename Visitor>
  static void sequence_table(Self& s, Visitor&& v) {
    v(Option{"--vocab",
             "Token vocabulary of a sequence model (transformer, gnmt); 0 = the model's default",
             "vocab"}
          .agreed(),
      s.vocab);
    v(Option{"--seq-len",
             "Tokens per source and per target sequence (transformer, gnmt); 0 = the model's "
             "default",
             "seq_len"}
          .agreed(),
      s.seq_len);
    v(Option{"--min-seq-len",
             "Synthetic data of a sequence model: each global batch draws its length uniformly "
             "from [--min-seq-len, --seq-len] (no padding), and tokens/s counts the tokens the "
             "batches held; 0 = every batch at --seq-len",
             "min_seq_len"}
          .agreed(),
      s.min_seq_len);
    v(Option{"--ambiguity",
             "Synthetic data of a translation model: each target word is, with this probability, "
             "its source word's second translation instead of its first, drawn per sample as a "
             "real text's choice between synonyms; the best possible token accuracy is then "
             "1 - P, and the gradient keeps a noise that training cannot remove "
             "(docs/models.md). In [0, 0.5); 0 = one translation per word",
             "ambiguity"}
          .agreed(),
      s.ambiguity);
    v(Option{"--hidden",
             "Hidden size: gnmt's LSTMs, attention and embedding (1024); the transformer's "
             "d_model (512, 1024 big), with a feed-forward of 4x and heads of 64 features (one "
             "head when not a multiple of 64); 0 = the model's default",
             "hidden"}
          .agreed(),
      s.hidden);
  }
};

}  // namespace dlscale::models
