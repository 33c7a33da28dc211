#pragma once
// Everything `dlscale train` can be asked, parsed once at the edge into this
// struct and validated by resolve_train_options() before any work starts.
#include <cstdint>
#include <string>

#include "data/data_options.h"
#include "dp/sync_options.h"
#include "launch/job_options.h"
#include "models/model.h"
#include "train/amp.h"
#include "train/recipe.h"

namespace dlscale::train {

enum class OptimizerKind { kSgd, kMomentum, kNesterov, kAdam, kLars };

/// Layout of 4-D activations and weights. oneDNN's CPU convolutions run
/// faster on channels-last (NHWC) tensors; see docs/metrics.md.
enum class MemoryFormat { kChannelsLast, kContiguous };

/// "sgd" | "momentum" | "nesterov" | "adam" | "lars"; throws dlscale::Error otherwise.
OptimizerKind parse_optimizer(const std::string& name);
std::string to_string(OptimizerKind kind);

/// When rank 0's batch-norm statistics (module buffers) are copied to the
/// other workers: never, once at start with the weights, or before every step
/// (PyTorch DDP's broadcast_buffers=True).
enum class SyncBuffers { kNone, kInit, kStep };
SyncBuffers parse_sync_buffers(const std::string& name);
std::string to_string(SyncBuffers policy);

/// "channels-last" | "contiguous"; throws dlscale::Error otherwise.
MemoryFormat parse_memory_format(const std::string& name);
std::string to_string(MemoryFormat format);

struct TrainOptions {
  std::string model = "resnet18";
  int64_t batch = 32;          ///< samples per step per worker (weak scaling)
  int64_t global_batch = 0;    ///< > 0: strong scaling, per-worker batch = global / workers
  int64_t steps = 20;          ///< total steps, including the warm-up steps
  int64_t warmup = 3;          ///< first steps excluded from the measurement
  int threads = 0;             ///< intra-op threads per worker; 0 = cores / local workers (>= 1)
  int64_t image_size = 0;      ///< input height = width; 0 = the model's default
  int64_t num_classes = 0;     ///< 0 = the model's default
  bool aux_logits = false;     ///< train auxiliary classifiers too (googlenet, inception3)
  double dropout = -1;         ///< override every dropout probability; < 0 = the model's own
  std::string optimizer = "sgd";
  double lr = 0.01;            ///< learning rate
  double momentum = 0.9;       ///< used by momentum, nesterov and lars
  double weight_decay = 0.0;   ///< L2 penalty
  uint64_t seed = 42;          ///< model initialization, data order and augmentation
  int64_t display_every = 10;  ///< print a step line every this many steps; 0 = never
  int64_t synthetic_batches = 1;  ///< distinct synthetic batches cycled through
  std::string device = "cpu";  ///< "cpu", "cuda" (a GPU per local rank) or "cuda:N"
  bool share_gpus = false;     ///< let several local workers use one GPU (docs/gpu.md)
  std::string amp = "none";    ///< none | bf16 | fp16: autocast of the forward pass (train/amp.h)
  std::string memory_format = "channels-last";  ///< "channels-last" or "contiguous"
  bool keep_freed_memory = true;  ///< tune malloc to reuse freed activations (core/memory.h)
  std::string json_path;       ///< result record file; "" = none
  std::string save_weights;    ///< rank 0 saves the final parameters here (torch::save); "" = no
  data::DataOptions data;      ///< --data and the input pipeline (docs/data.md)
  RecipeOptions recipe;        ///< epochs, evaluation, schedule, LARS, checkpoints (docs/convergence.md)

  // Data parallelism (docs/launch.md, docs/strategies.md).
  int workers = 1;               ///< worker processes on this node
  int nnodes = 1;                ///< nodes, each running `workers` processes
  int node_rank = 0;             ///< this node's index in [0, nnodes)
  std::string master_addr = "127.0.0.1";  ///< host of the rendezvous store (node 0)
  int master_port = 29500;       ///< its port (multi-node; a local job picks a free one)
  std::string master_bind;       ///< the store's listen address; "" = master_addr
  std::string host_addr;         ///< address other nodes reach this node's workers at; "" = host name
  std::string backend;           ///< "gloo" | "mpi"; "" = mpi under mpirun, gloo otherwise
  std::string mpi_collectives = "blocking";  ///< blocking | polled (launch/job_options.h)
  std::string cluster;           ///< emulated cluster to run on (docs/cluster.md); "" = none
  int workers_per_host = 1;      ///< --cluster: workers in each host
  int cluster_hosts = 0;         ///< --cluster: its hosts (from the launch, for the record)
  double cluster_link_mbit = 0;  ///< --cluster: its link rate; 0 = unshaped (for the record)
  std::string strategy = "allreduce";  ///< allreduce | tree | hierarchical | independent
  std::string compress = "none";  ///< none | fp16 | bf16: the type gradients travel in
  int ranks_per_node = 0;        ///< hierarchical: ranks per node group; 0 = by host
  int ps_shards = 1;             ///< ps: server shards
  std::string ps_placement = "colocated";  ///< ps: colocated | dedicated
  std::string ps_assign = "round-robin";   ///< ps: round-robin | greedy
  double ps_partition_mb = 0;    ///< ps: split tensors bigger than this over shards; 0 = never
  std::string ps_mode = "sync";  ///< ps: sync | async
  int max_staleness = -1;        ///< ps async: bound in versions; -1 = unbounded
  double bucket_mb = 25.0;       ///< gradient bucket size in MiB; 0 = one bucket after backward
  double first_bucket_mb = 1.0;  ///< size of the first bucket in MiB
  std::string sync_buffers = "init";  ///< none | init | step
  double timeout_s = 60.0;       ///< a worker silent or a collective stuck this long fails the job
  std::string trace_path;        ///< Chrome-trace JSON of every rank's phases and buckets
  bool bind_cores = false;       ///< pin each local worker to its own cores
  bool verbose_ranks = false;    ///< let every rank print to stdout, not only rank 0
};

/// Options after validation, with defaults filled in.
struct ResolvedTrainOptions {
  TrainOptions options;        ///< every 0/"" default replaced by its value
  OptimizerKind optimizer = OptimizerKind::kSgd;
  MemoryFormat memory_format = MemoryFormat::kChannelsLast;
  SyncBuffers sync_buffers = SyncBuffers::kInit;
  AmpMode amp = AmpMode::kNone;
  dp::SyncOptions sync;        ///< strategy, buckets, compression (node_name left to the job)
  int64_t channels = 0;
  int64_t measured_steps = 0;
  int64_t global_batch = 0;  ///< samples per step over all workers
  int world_size = 1;
  int local_world_size = 1;  ///< workers on this node
  bool strong_scaling = false;
};

/// The model-building part of `options` (not yet resolved against the spec).
models::ModelOptions model_options(const TrainOptions& options);

/// The strategy part of `options`, parsed (not yet checked).
dp::SyncOptions sync_options(const TrainOptions& options);

/// The launch part of `options` (threads as given: resolve first). Throws
/// dlscale::Error when --timeout is not a positive number of seconds.
launch::JobOptions job_options(const TrainOptions& options);

/// Validates every field and fills defaults for a job of `world_size`
/// workers, `local_world_size` of them on this node. Throws dlscale::Error
/// with a one-line message naming the bad value and what is allowed. Also
/// checks that output paths can be written, so a long run never ends with a
/// lost result. With world_size = 0 the size is nnodes × workers.
ResolvedTrainOptions resolve_train_options(const TrainOptions& options, int world_size = 0,
                                           int local_world_size = 0);

/// With --epochs, sets the steps to epochs × `steps_per_epoch` (the data's
/// global batches per epoch) and re-checks them against --warmup.
void apply_epochs(ResolvedTrainOptions& resolved, int64_t steps_per_epoch);

}  // namespace dlscale::train
