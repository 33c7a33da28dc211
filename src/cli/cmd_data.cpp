// dlscale data pack | index | inspect | verify | bench (docs/data.md, "Tools"). The
// bench runs behind the executables' seam (cli/torch_commands.h).
#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/option_binding.h"
#include "cli/torch_commands.h"
#include "data/data_tools.h"

namespace dlscale::cli {

namespace {

void add_pack(CLI::App* data) {
  auto o = std::make_shared<data::PackOptions>();
  CLI::App* cmd = data->add_subcommand(
      "pack",
      "Pack an image folder or IDX dataset into shards: WebDataset tar files (SAMPLE.jpg|png + "
      "SAMPLE.cls) or TFRecord files of tf.train.Example (image/encoded, image/class/label), "
      "named train-KKKKK-of-NNNNN[.tar] and validation-... for a test split");
  cmd->add_option("source", o->source, "folder:DIR, idx:DIR, fashion-mnist, or a bare directory")
      ->required();
  cmd->add_option("destination", o->destination, "Directory to write the shards in (created)")
      ->required();
  cmd->add_option("--format", o->format, "wds | tfrecord")->capture_default_str();
  cmd->add_option("--shards", o->shards, "Shards per split")->capture_default_str();
  cmd->add_option("--resize", o->resize,
                  "Resize the shorter side to this many pixels and centre-crop a square; 0 = keep")
      ->capture_default_str();
  cmd->add_option("--encoding", o->encoding,
                  "auto (png for IDX, jpeg for image folders) | jpeg | png")
      ->capture_default_str();
  cmd->add_option("--quality", o->quality, "JPEG quality, 1..100")->capture_default_str();
  cmd->add_option("--seed", o->seed, "Samples are written in this seed's shuffled order")
      ->capture_default_str();
  cmd->callback([o] {
    const int64_t n = data::pack_dataset(*o, std::cerr);
    std::cout << fmt::format("packed {} samples into {}\n", n, o->destination);
  });
}

void add_inspect_and_verify(CLI::App* data) {
  auto path = std::make_shared<std::string>();
  CLI::App* inspect = data->add_subcommand(
      "inspect", "Show a dataset's splits, samples, classes, first image shape and file sizes");
  inspect->add_option("path", *path, "A --data value or a path (format detected)")->required();
  inspect->callback([path] { data::inspect_dataset(*path, std::cout); });

  auto vpath = std::make_shared<std::string>();
  CLI::App* verify = data->add_subcommand(
      "verify",
      "Read and decode every sample of every split (TFRecord CRCs included); names the first "
      "corrupt file and record and exits 2");
  verify->add_option("path", *vpath, "A --data value or a path (format detected)")->required();
  verify->callback([vpath] {
    const int64_t n = data::verify_dataset(*vpath, std::cerr);
    std::cout << fmt::format("verified {} samples: all readable\n", n);
  });
}

void add_index(CLI::App* data) {
  auto path = std::make_shared<std::string>();
  auto force = std::make_shared<bool>(false);
  CLI::App* cmd = data->add_subcommand(
      "index",
      "Write an index sidecar (SHARD.dlsidx: offsets, sizes, labels) beside every WebDataset or TFRecord "
      "shard that lacks a valid one, so that opening the data reads the indexes instead of every record "
      "(docs/data.md, \"Index sidecars\"). 'data pack' writes them itself");
  cmd->add_option("path", *path, "A wds:/tfrecord: --data value, a shard or a directory of shards")->required();
  cmd->add_flag("--force", *force, "Rewrite every index, valid or not");
  cmd->callback([path, force] {
    const data::IndexOutcome o = data::index_location(*path, *force, std::cerr);
    std::cout << fmt::format("indexed {} shard(s) of {} samples: {} written, {} up to date\n", o.shards,
                             o.samples, o.written, o.shards - o.written);
  });
}

void add_bench(CLI::App* data, const std::vector<std::string>& argv) {
  auto o = std::make_shared<data::DataBenchOptions>();
  CLI::App* cmd = data->add_subcommand(
      "bench", "Measure the input pipeline alone (read, decode, augment, batch): samples/s");
  add_data_flags(cmd, o->data);
  add_options(cmd, *o, "");
  cmd->callback([o, argv] { run_data_bench_command(*o, argv); });
}

}  // namespace

void add_data_command(CLI::App& app, const std::vector<std::string>& argv) {
  CLI::App* data = app.add_subcommand("data", "Pack, index, inspect, verify and benchmark datasets");
  data->require_subcommand(1);
  add_pack(data);
  add_inspect_and_verify(data);
  add_index(data);
  add_bench(data, argv);
}

}  // namespace dlscale::cli
