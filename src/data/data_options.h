#pragma once
// What `--data` and the pipeline flags ask for (docs/data.md), with their
// table (core/option_table.h). Torch-free so option parsing and sweeps need
// no LibTorch.
#include <cstdint>
#include <string>

#include "core/enum_names.h"
#include "core/option_table.h"

namespace dlscale::data {

/// --augment: the training augmentation, or auto (crop-flip for raw
/// pixels, rrc-flip for JPEG/PNG, none for synthetic data).
enum class AugmentChoice { kAuto, kNone, kFlip, kCropFlip, kRrcFlip };
const EnumNames<AugmentChoice, 5>& enum_names(AugmentChoice);

/// --data-order: every epoch one seeded permutation of the whole dataset
/// (global), or each worker its own shards through a shuffle buffer.
enum class DataOrder { kGlobal, kStreaming };
const EnumNames<DataOrder, 2>& enum_names(DataOrder);

struct DataOptions {
  std::string spec = "synthetic";  ///< synthetic | fashion-mnist | idx:DIR | folder:DIR | wds:PATH | tfrecord:PATH
  int threads = 1;                 ///< decode/transform threads per worker
  int prefetch = 2;                ///< batches prepared ahead of the step; 0 = none
  bool cache = false;              ///< keep decoded samples in memory
  int64_t cache_mb = 0;            ///< --cache's budget in MiB; 0 = no limit
  bool reduced_decode = true;      ///< of a JPEG only its crop, at the smallest 1/2^k scale still covering it
  AugmentChoice augment = AugmentChoice::kAuto;
  bool shuffle = true;             ///< a new seeded order every epoch
  DataOrder order = DataOrder::kGlobal;
  int64_t shuffle_buffer = 1024;   ///< streaming: samples held for shuffling
  bool skip_corrupt = false;       ///< replace corrupt samples instead of failing
  std::string stage_dir;           ///< copy the data files here before training; "" = read in place
  int64_t synthetic_test = 1024;   ///< synthetic data: held-out samples each evaluation reads

  template <typename Self, typename Visitor>
  static void table(Self& s, Visitor&& v) {
    v(Option{"--data",
             "What to train on: synthetic (generated per sample, the no-I/O baseline) | fashion-mnist (Debian's "
             "dataset-fashion-mnist) | idx:DIR (MNIST-family IDX files) | folder:DIR (one subfolder of JPEG/PNG "
             "images per class) | wds:PATH (WebDataset tar shards: a .tar file or a directory of them) | "
             "tfrecord:PATH (TFRecord shards of tf.train.Example, tf_cnn_benchmarks' ImageNet layout). "
             "Channels, image size and classes come from the data unless given",
             "data"}
          .agreed(),
      s.spec);
    v(Option{"--data-threads",
             "Threads per worker that read, decode and augment samples (apart from the compute threads)",
             "data_threads"},
      s.threads);
    v(Option{"--prefetch",
             "Batches prepared ahead of the training step on a background thread; 0 = each batch is prepared "
             "when the step asks for it",
             "prefetch"},
      s.prefetch);
    v(Option{"--cache", "Keep decoded samples in memory after their first use", "cache"}, s.cache);
    v(Option{"--cache-mb",
             "With --cache: keep at most this many MiB of decoded samples; once full, the samples kept stay "
             "and the others are decoded each time (0 = no limit)",
             "cache_mb"},
      s.cache_mb);
    v(Option{"!--full-decode",
             "Decode every JPEG whole, at its stored size (by default a JPEG is decoded only where its crop "
             "lies, straight to the smallest 1/2, 1/4 or 1/8 scale that still covers the crop at the output "
             "size; not with --cache)",
             "reduced_decode"}
          .agreed(),
      s.reduced_decode);
    v(Option{"--augment",
             "Training augmentation: auto (crop-flip for raw pixels, rrc-flip for JPEG/PNG) | none | flip | "
             "crop-flip (random crop of the image padded by size/8, horizontal flip) | rrc-flip "
             "(random-resized crop, horizontal flip)",
             "augment"}
          .agreed(),
      s.augment);
    v(Option{"!--no-shuffle",
             "Read every epoch in dataset order (by default each epoch is a new seeded permutation)", "shuffle"}
          .agreed(),
      s.shuffle);
    v(Option{"--data-order",
             "global (every epoch one seeded permutation of the whole dataset; each global batch is the same "
             "whatever the worker count) | streaming (each worker reads only its own shards, front to back in "
             "a seeded shard order, through a shuffle buffer: less reading, but the batches depend on the "
             "worker count)",
             "data_order"}
          .agreed(),
      s.order);
    v(Option{"--shuffle-buffer", "streaming: samples held in the shuffle buffer (1 = shard order)",
             "shuffle_buffer"}
          .agreed(),
      s.shuffle_buffer);
    v(Option{"--skip-corrupt",
             "Replace an unreadable sample by the next readable one and count it, instead of failing the run",
             "skip_corrupt"},
      s.skip_corrupt);
    v(Option{"--stage-dir",
             "Copy the data files to this (node-local) directory before training; the copy time is reported "
             "apart from the steps",
             "stage_dir"}
          .no_default(),
      s.stage_dir);
    v(Option{"--synthetic-test",
             "Synthetic data: held-out samples each evaluation reads (--eval-every, --target-accuracy), drawn "
             "from the same generator at indices no training sample has",
             "synthetic_test"}
          .agreed(),
      s.synthetic_test);
  }
};

/// The parsed --data value.
struct DataSpec {
  std::string kind;  ///< synthetic | idx | folder | wds | tfrecord
  std::string path;  ///< "" for synthetic
  std::string text() const { return path.empty() ? kind : kind + ":" + path; }
};

/// Where Debian's dataset-fashion-mnist package puts its files.
inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

/// Parses --data; `fashion-mnist` becomes idx:kFashionMnistDir. Throws
/// dlscale::Error naming the value and the allowed forms.
DataSpec parse_data_spec(const std::string& text);

/// Range-checks the pipeline flags (threads, prefetch, buffer); throws
/// dlscale::Error naming the flag.
void check_data_options(const DataOptions& options);

}  // namespace dlscale::data
