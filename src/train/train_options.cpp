#include "train/train_options.h"

#include <sched.h>
#include <torch/torch.h>

#include "core/error.h"
#include "core/files.h"
#include "core/torch_compat.h"
#include "models/model.h"

namespace dlscale::train {

OptimizerKind parse_optimizer(const std::string& name) {
  if (name == "sgd") return OptimizerKind::kSgd;
  if (name == "momentum") return OptimizerKind::kMomentum;
  if (name == "nesterov") return OptimizerKind::kNesterov;
  if (name == "adam") return OptimizerKind::kAdam;
  throw Error(fmt::format("unknown optimizer '{}'; allowed: sgd, momentum, nesterov, adam", name));
}

std::string to_string(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::kSgd: return "sgd";
    case OptimizerKind::kMomentum: return "momentum";
    case OptimizerKind::kNesterov: return "nesterov";
    case OptimizerKind::kAdam: return "adam";
  }
  return "?";
}

MemoryFormat parse_memory_format(const std::string& name) {
  if (name == "channels-last") return MemoryFormat::kChannelsLast;
  if (name == "contiguous") return MemoryFormat::kContiguous;
  throw Error(
      fmt::format("unknown memory format '{}'; allowed: channels-last, contiguous", name));
}

std::string to_string(MemoryFormat format) {
  return format == MemoryFormat::kChannelsLast ? "channels-last" : "contiguous";
}

int available_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
  return 1;
}

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

ResolvedTrainOptions resolve_train_options(const TrainOptions& in) {
  ResolvedTrainOptions r;
  r.options = in;
  TrainOptions& o = r.options;
  const models::ModelSpec& spec = models::find_model(o.model);
  DLSCALE_CHECK(o.batch >= 1, "--batch must be >= 1 (got {})", o.batch);
  DLSCALE_CHECK(o.warmup >= 0, "--warmup must be >= 0 (got {})", o.warmup);
  DLSCALE_CHECK(o.steps > o.warmup,
                "--steps ({}) must be greater than --warmup ({}): steps include the warm-up and "
                "at least one step must be measured",
                o.steps, o.warmup);
  DLSCALE_CHECK(o.threads >= 0, "--threads must be >= 0 (got {}; 0 = all cores)", o.threads);
  if (o.threads == 0) o.threads = available_cores();
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

  models::ModelOptions mo;
  mo.num_classes = o.num_classes;
  mo.image_size = o.image_size;
  mo.aux_logits = o.aux_logits;
  mo = models::resolve_options(spec, mo);
  o.num_classes = mo.num_classes;
  o.image_size = mo.image_size;
  r.channels = spec.channels;
  r.measured_steps = o.steps - o.warmup;
  r.world_size = 1;
  r.global_batch = o.batch * r.world_size;
  if (!o.json_path.empty()) check_output_path(o.json_path);
  return r;
}

}  // namespace dlscale::train
