#pragma once
// What `--data` and the pipeline flags ask for (docs/data.md). Torch-free so
// option parsing and sweeps need no LibTorch.
#include <string>

namespace dlscale::data {

struct DataOptions {
  std::string spec = "synthetic";  ///< synthetic | fashion-mnist | idx:DIR | folder:DIR | wds:PATH | tfrecord:PATH
  int threads = 1;                 ///< decode/transform threads per worker
  int prefetch = 2;                ///< batches prepared ahead of the step; 0 = none
  bool cache = false;              ///< keep decoded samples in memory
  std::string augment = "auto";    ///< auto | none | flip | crop-flip | rrc-flip
  bool shuffle = true;             ///< a new seeded order every epoch
  std::string order = "global";    ///< global (exact global batches) | streaming (own shards, shuffle buffer)
  int64_t shuffle_buffer = 1024;   ///< streaming: samples held for shuffling
  bool skip_corrupt = false;       ///< replace corrupt samples instead of failing
  std::string stage_dir;           ///< copy the data files here before training; "" = read in place
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

/// Range-checks the pipeline flags (threads, prefetch, augment); throws
/// dlscale::Error naming the flag.
void check_data_options(const DataOptions& options);

}  // namespace dlscale::data
