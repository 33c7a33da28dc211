#include "train/train_options.h"

#include <algorithm>
#include <torch/torch.h>

#include "core/enum_names.h"
#include "core/error.h"
#include "core/files.h"
#include "core/sysinfo.h"
#include "core/torch_compat.h"
#include "models/model.h"

namespace dlscale::train {

namespace {

constexpr EnumNames<OptimizerKind, 4> kOptimizers{
    "optimizer",
    {{{OptimizerKind::kSgd, "sgd"},
      {OptimizerKind::kMomentum, "momentum"},
      {OptimizerKind::kNesterov, "nesterov"},
      {OptimizerKind::kAdam, "adam"}}}};
constexpr EnumNames<MemoryFormat, 2> kMemoryFormats{
    "memory format",
    {{{MemoryFormat::kChannelsLast, "channels-last"}, {MemoryFormat::kContiguous, "contiguous"}}}};
constexpr EnumNames<SyncBuffers, 3> kSyncBuffers{
    "--sync-buffers",
    {{{SyncBuffers::kNone, "none"}, {SyncBuffers::kInit, "init"}, {SyncBuffers::kStep, "step"}}}};

}  // namespace

OptimizerKind parse_optimizer(const std::string& name) { return kOptimizers.parse(name); }
std::string to_string(OptimizerKind kind) { return kOptimizers.name(kind); }
MemoryFormat parse_memory_format(const std::string& name) { return kMemoryFormats.parse(name); }
std::string to_string(MemoryFormat format) { return kMemoryFormats.name(format); }
SyncBuffers parse_sync_buffers(const std::string& name) { return kSyncBuffers.parse(name); }
std::string to_string(SyncBuffers policy) { return kSyncBuffers.name(policy); }

namespace {

void check_device(const std::string& device) {
  torch::Device parsed = torch::kCPU;
  try {
    parsed = torch::Device(device);
  } catch (const std::exception&) {
    throw Error(fmt::format("unknown device '{}'; allowed: cpu, cuda, cuda:N", device));
  }
  DLSCALE_CHECK(parsed.is_cpu() || parsed.is_cuda(),
                "unsupported device '{}'; allowed: cpu, cuda, cuda:N", device);
  DLSCALE_CHECK(!parsed.is_cuda() || compat::cuda_available(),
                "device '{}' requested but this dlscale was built against a LibTorch without "
                "CUDA or no GPU is visible",
                device);
}

}  // namespace

models::ModelOptions model_options(const TrainOptions& o) {
  models::ModelOptions mo;
  mo.num_classes = o.num_classes;
  mo.image_size = o.image_size;
  mo.aux_logits = o.aux_logits;
  mo.dropout = o.dropout;
  return mo;
}

ResolvedTrainOptions resolve_train_options(const TrainOptions& in, int world_size,
                                           int local_world_size) {
  ResolvedTrainOptions r;
  r.options = in;
  TrainOptions& o = r.options;
  const models::ModelSpec& spec = models::find_model(o.model);
  DLSCALE_CHECK(o.workers >= 1, "--workers must be >= 1 (got {})", o.workers);
  DLSCALE_CHECK(o.nnodes >= 1, "--nnodes must be >= 1 (got {})", o.nnodes);
  DLSCALE_CHECK(o.node_rank >= 0 && o.node_rank < o.nnodes,
                "--node-rank must be in [0, {}) (got {})", o.nnodes, o.node_rank);
  DLSCALE_CHECK(o.master_port >= 1 && o.master_port <= 65535,
                "--master-port must be in [1, 65535] (got {})", o.master_port);
  DLSCALE_CHECK(o.backend.empty() || o.backend == "gloo" || o.backend == "mpi",
                "unknown --backend '{}'; allowed: gloo, mpi", o.backend);
  r.sync.strategy = dp::parse_strategy(o.strategy);
  r.sync.compress = dp::parse_compression(o.compress);
  r.sync.bucket_mb = o.bucket_mb;
  r.sync.first_bucket_mb = o.first_bucket_mb;
  r.sync.ranks_per_node = o.ranks_per_node;
  dp::check_sync_options(r.sync);
  DLSCALE_CHECK(o.timeout_s > 0, "--timeout must be > 0 seconds (got {})", o.timeout_s);
  r.sync_buffers = parse_sync_buffers(o.sync_buffers);
  r.world_size = world_size > 0 ? world_size : o.nnodes * o.workers;
  r.local_world_size = local_world_size > 0 ? local_world_size : o.workers;
  DLSCALE_CHECK(o.global_batch >= 0, "--global-batch must be >= 0 (got {}; 0 = weak scaling)",
                o.global_batch);
  if (o.global_batch > 0) {
    DLSCALE_CHECK(o.global_batch % r.world_size == 0,
                  "--global-batch {} is not divisible by {} workers (strong scaling needs "
                  "global batch = workers x per-worker batch)",
                  o.global_batch, r.world_size);
    o.batch = o.global_batch / r.world_size;
    r.strong_scaling = true;
  }
  DLSCALE_CHECK(o.batch >= 1, "--batch must be >= 1 (got {})", o.batch);
  DLSCALE_CHECK(o.warmup >= 0, "--warmup must be >= 0 (got {})", o.warmup);
  DLSCALE_CHECK(o.steps > o.warmup,
                "--steps ({}) must be greater than --warmup ({}): steps include the warm-up and "
                "at least one step must be measured",
                o.steps, o.warmup);
  DLSCALE_CHECK(o.threads >= 0, "--threads must be >= 0 (got {}; 0 = all cores)", o.threads);
  if (o.threads == 0) o.threads = std::max(1, available_cores() / r.local_world_size);
  DLSCALE_CHECK(o.lr > 0, "--lr must be > 0 (got {})", o.lr);
  DLSCALE_CHECK(o.momentum >= 0 && o.momentum < 1, "--momentum must be in [0, 1) (got {})",
                o.momentum);
  DLSCALE_CHECK(o.weight_decay >= 0, "--weight-decay must be >= 0 (got {})", o.weight_decay);
  DLSCALE_CHECK(o.display_every >= 0, "--display-every must be >= 0 (got {})", o.display_every);
  DLSCALE_CHECK(o.synthetic_batches >= 1, "--synthetic-batches must be >= 1 (got {})",
                o.synthetic_batches);
  r.optimizer = parse_optimizer(o.optimizer);
  DLSCALE_CHECK(r.optimizer != OptimizerKind::kNesterov || o.momentum > 0,
                "--optimizer nesterov needs --momentum > 0 (got {})", o.momentum);
  check_device(o.device);
  r.memory_format = parse_memory_format(o.memory_format);

  const models::ModelOptions mo = models::resolve_options(spec, model_options(o));
  o.num_classes = mo.num_classes;
  o.image_size = mo.image_size;
  r.channels = spec.channels;
  r.measured_steps = o.steps - o.warmup;
  r.global_batch = o.batch * r.world_size;
  for (const std::string* path : {&o.json_path, &o.trace_path, &o.save_weights}) {
    if (!path->empty()) check_output_path(*path);
  }
  return r;
}

}  // namespace dlscale::train
