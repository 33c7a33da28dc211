// dlscale train: the training benchmark (flags → TrainOptions → Trainer).
#include <cstdlib>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/launch_flags.h"
#include "models/model.h"
#include "launch/train_job.h"
#include "launch/launch_env.h"

namespace dlscale::cli {

void add_data_flags(CLI::App* cmd, data::DataOptions& d) {
  const std::string group = "Data (docs/data.md)";
  cmd->add_option("--data", d.spec,
                  "What to train on: synthetic (generated per sample, the no-I/O baseline) | "
                  "fashion-mnist (Debian's dataset-fashion-mnist) | idx:DIR (MNIST-family IDX "
                  "files) | folder:DIR (one subfolder of JPEG/PNG images per class) | wds:PATH "
                  "(WebDataset tar shards: a .tar file or a directory of them) | tfrecord:PATH "
                  "(TFRecord shards of tf.train.Example, tf_cnn_benchmarks' ImageNet layout). "
                  "Channels, image size and classes come from the data unless given")
      ->capture_default_str()
      ->group(group);
  cmd->add_option("--data-threads", d.threads,
                  "Threads per worker that read, decode and augment samples (apart from the "
                  "compute threads)")
      ->capture_default_str()
      ->group(group);
  cmd->add_option("--prefetch", d.prefetch,
                  "Batches prepared ahead of the training step on a background thread; 0 = each "
                  "batch is prepared when the step asks for it")
      ->capture_default_str()
      ->group(group);
  cmd->add_flag("--cache", d.cache, "Keep decoded samples in memory after their first use")
      ->group(group);
  cmd->add_option("--augment", d.augment,
                  "Training augmentation: auto (crop-flip for raw pixels, rrc-flip for JPEG/PNG) "
                  "| none | flip | crop-flip (random crop of the image padded by size/8, "
                  "horizontal flip) | rrc-flip (random-resized crop, horizontal flip)")
      ->capture_default_str()
      ->group(group);
  cmd->add_flag("!--no-shuffle", d.shuffle,
                "Read every epoch in dataset order (by default each epoch is a new seeded "
                "permutation)")
      ->group(group);
  cmd->add_option("--data-order", d.order,
                  "global (every epoch one seeded permutation of the whole dataset; each global "
                  "batch is the same whatever the worker count) | streaming (each worker reads only "
                  "its own shards, front to back in a seeded shard order, through a shuffle buffer: "
                  "less reading, but the batches depend on the worker count)")
      ->capture_default_str()
      ->group(group);
  cmd->add_option("--shuffle-buffer", d.shuffle_buffer,
                  "streaming: samples held in the shuffle buffer (1 = shard order)")
      ->capture_default_str()
      ->group(group);
  cmd->add_flag("--skip-corrupt", d.skip_corrupt,
                "Replace an unreadable sample by the next readable one and count it, instead of "
                "failing the run")
      ->group(group);
  cmd->add_option("--stage-dir", d.stage_dir,
                  "Copy the data files to this (node-local) directory before training; the copy "
                  "time is reported apart from the steps")
      ->group(group);
}

void add_train_command(CLI::App& app, const std::vector<std::string>& argv) {
  auto opts = std::make_shared<train::TrainOptions>();
  CLI::App* cmd = app.add_subcommand(
      "train",
      "Train a model on synthetic or real data (--data) and measure throughput and where the "
      "time goes.\n"
      "Prints a header, a line every --display-every steps and a summary (global samples/s, "
      "mean +/- standard error and jitter of per-step rates, p50/p95 step time, median "
      "per-phase breakdown).");
  cmd->add_option("--model,-m", opts->model, "Model to train; one of: " + models::known_model_names())
      ->capture_default_str();
  cmd->add_option("--batch,-b", opts->batch, "Samples per step per worker")->capture_default_str();
  CLI::Option* steps = cmd->add_option("--steps", opts->steps,
                                       "Total steps including warm-up; measured steps = steps - "
                                       "warmup")
                           ->capture_default_str();
  cmd->add_option("--warmup", opts->warmup, "Warm-up steps excluded from the measurement")
      ->capture_default_str();
  cmd->add_option("--threads,-t,--threads-per-worker", opts->threads,
                  "Intra-op compute threads per worker (LibTorch and BLAS); 0 = cores / local "
                  "workers, at least 1")
      ->capture_default_str();
  cmd->add_option("--global-batch", opts->global_batch,
                  "Strong scaling: samples per step over all workers, split evenly (must divide "
                  "by the worker count); 0 = weak scaling with --batch per worker")
      ->capture_default_str();
  cmd->add_option("--image-size", opts->image_size,
                  "Input height = width in pixels; 0 = the model's default (see 'dlscale models')")
      ->capture_default_str();
  cmd->add_option("--classes", opts->num_classes, "Output classes; 0 = the model's default")
      ->capture_default_str();
  cmd->add_flag("--aux-logits", opts->aux_logits,
                "Build and train the auxiliary classifiers (googlenet, inception3)");
  cmd->add_option("--dropout", opts->dropout,
                  "Probability of every dropout layer; negative = the model's own (0 disables "
                  "dropout, which makes N-worker runs comparable to one worker step for step)")
      ->capture_default_str();
  cmd->add_option("--optimizer", opts->optimizer, "sgd | momentum | nesterov | adam | lars (docs/convergence.md)")
      ->capture_default_str();
  cmd->add_option("--lr", opts->lr, "Learning rate")->capture_default_str();
  cmd->add_option("--momentum", opts->momentum, "Momentum for --optimizer momentum|nesterov")
      ->capture_default_str();
  cmd->add_option("--weight-decay", opts->weight_decay, "L2 weight decay")->capture_default_str();
  cmd->add_option("--seed", opts->seed,
                  "Seed of model initialization, synthetic data, sample order and augmentation")
      ->capture_default_str();
  cmd->add_option("--display-every", opts->display_every,
                  "Print a step line every N steps (and the first and last); 0 = none")
      ->capture_default_str();
  cmd->add_option("--synthetic-batches", opts->synthetic_batches,
                  "Distinct synthetic batches generated once and cycled through")
      ->capture_default_str();
  cmd->add_option("--device", opts->device,
                  "cpu | cuda (local worker r gets GPU r mod GPUs) | cuda:N (needs a CUDA "
                  "LibTorch build; docs/gpu.md)")
      ->capture_default_str();
  cmd->add_option("--amp", opts->amp,
                  "none | bf16 | fp16: mixed precision (autocast of the forward pass); fp16 adds "
                  "dynamic loss scaling and needs --device cuda (docs/gpu.md)")
      ->capture_default_str();
  cmd->add_option("--memory-format", opts->memory_format,
                  "channels-last | contiguous: layout of images and conv weights (channels-last "
                  "is faster with oneDNN on CPU)")
      ->capture_default_str();
  cmd->add_flag("!--no-malloc-tuning", opts->keep_freed_memory,
                "Leave glibc malloc at its defaults (by default dlscale keeps freed memory for "
                "reuse instead of unmapping it every step)");
  cmd->add_option("--json", opts->json_path,
                  "Write the self-describing JSON result record here (atomically)");
  cmd->add_option("--save-weights", opts->save_weights,
                  "Rank 0 saves the final parameters here (torch::save of the parameter list)");

  add_data_flags(cmd, opts->data);
  add_recipe_flags(cmd, opts->recipe)->excludes(steps);

  const std::string dp = "Data parallelism";
  auto launch = std::make_shared<LaunchFlags>();
  add_launch_flags(cmd, *launch, dp);
  cmd->add_option("--strategy", opts->strategy,
                  "How gradients are combined (docs/strategies.md): allreduce (backend-native, "
                  "bucketed) | tree (binary tree to rank 0 and back over send/recv) | hierarchical "
                  "(reduce in each node, allreduce among node leaders, broadcast in the node) | "
                  "independent (no exchange: each worker trains its own replica) | ps (parameter "
                  "server: workers push gradients to shards that own the variables and their "
                  "optimizer, and pull the new values)")
      ->capture_default_str()
      ->group(dp);
  cmd->add_option("--compress", opts->compress,
                  "none | fp16 | bf16: gradients travel and are summed in this type, then are "
                  "cast back to float32 (allreduce, tree, hierarchical)")
      ->capture_default_str()
      ->group(dp);
  cmd->add_option("--ranks-per-node", opts->ranks_per_node,
                  "hierarchical: form node groups of this many consecutive ranks; 0 = group by "
                  "host (by launcher node for --workers/--nnodes jobs)")
      ->capture_default_str()
      ->group(dp);
  const std::string ps = "Parameter server (--strategy ps)";
  cmd->add_option("--ps-shards", opts->ps_shards,
                  "Server shards the variables are spread over (colocated: at most one per worker)")
      ->capture_default_str()
      ->group(ps);
  cmd->add_option("--ps-placement", opts->ps_placement,
                  "colocated (the first K workers also host a shard each, on a server thread) | "
                  "dedicated (K extra server processes: the launcher starts them beside the "
                  "workers on node 0; under mpirun/srun the first K ranks serve; servers are not "
                  "counted as workers)")
      ->capture_default_str()
      ->group(ps);
  cmd->add_option("--ps-assign", opts->ps_assign,
                  "How variables go to shards: round-robin (registration order) | greedy "
                  "(largest first onto the least-loaded shard by bytes)")
      ->capture_default_str()
      ->group(ps);
  cmd->add_option("--ps-partition-mb", opts->ps_partition_mb,
                  "Split tensors bigger than this many MiB into near-equal pieces placed "
                  "separately; 0 = never split")
      ->capture_default_str()
      ->group(ps);
  cmd->add_option("--ps-mode", opts->ps_mode,
                  "sync (each shard sums all workers' gradients, applies once per step) | async "
                  "(each gradient applied on arrival; workers pull whatever is current)")
      ->capture_default_str()
      ->group(ps);
  cmd->add_option("--max-staleness", opts->max_staleness,
                  "async: a worker waits in pull until no applied gradient can be more than this "
                  "many versions stale (stale synchronous parallel; 0 = one worker at a time); "
                  "-1 = unbounded")
      ->capture_default_str()
      ->group(ps);
  cmd->add_option("--bucket-mb", opts->bucket_mb,
                  "Gradient bucket size in MiB; each bucket's collective overlaps backward. 0 = "
                  "one bucket of all gradients reduced after backward (no overlap)")
      ->capture_default_str()
      ->group(dp);
  cmd->add_option("--first-bucket-mb", opts->first_bucket_mb,
                  "Size of the first bucket (the last layers' gradients) in MiB")
      ->capture_default_str()
      ->group(dp);
  cmd->add_option("--sync-buffers", opts->sync_buffers,
                  "When rank 0's batch-norm statistics are copied to all workers: none | init "
                  "(with the weights at start) | step (before every step)")
      ->capture_default_str()
      ->group(dp);
  cmd->add_option("--trace", opts->trace_path,
                  "Write a Chrome-trace JSON (chrome://tracing, Perfetto) of every rank's "
                  "phases and bucket collectives")
      ->group(dp);
  cmd->callback([opts, launch, argv] {
    launch->copy_into(*opts);
    // The one place where dlscale reads the environment (docs/launch.md).
    const launch::LaunchEnv env =
        launch::detect_launch_env([](const char* name) { return std::getenv(name); });
    launch::run_train(*opts, env, argv, std::cout);
  });
}

}  // namespace dlscale::cli
