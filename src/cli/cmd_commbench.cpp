// dlscale commbench: the collective micro-benchmark (flags -> options -> job).
// The flags are torch-free; the run is behind the executables' seam
// (cli/torch_commands.h).
#include <memory>

#include "cli/commands.h"
#include "cli/torch_commands.h"

namespace dlscale::cli {
void add_commbench_command(CLI::App& app, const std::vector<std::string>& argv) {
  auto f = std::make_shared<CommbenchFlags>();
  CLI::App* cmd = app.add_subcommand(
      "commbench",
      "Time collectives as the strategies use them, over any sizes (nccl-tests' table: size, "
      "count, type, time, algbw, busbw, #wrong), check every result, and fit time = alpha + "
      "bytes/B per operation. Launched like 'train': --workers N, mpirun, srun, --nnodes.");
  cmd->add_option("--op", f->ops,
                  "Operations, comma-separated or repeated: allreduce (backend native) | tree | "
                  "hierarchical | broadcast | allgather | reduce_scatter | sendrecv (ping-pong, ranks 0-1) | all")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--min-bytes,-b", f->min_bytes, "Smallest message; K/M/G suffixes (x1024)")
      ->capture_default_str();
  cmd->add_option("--max-bytes,-e", f->max_bytes, "Largest message; K/M/G suffixes (x1024)")
      ->capture_default_str();
  cmd->add_option("--factor,-f", f->options.factor, "Each size is the previous times this")
      ->capture_default_str();
  cmd->add_option("--dtype,-d", f->options.dtype, "float32 | float16 | bfloat16 (f32, f16, bf16)")
      ->capture_default_str();
  cmd->add_option("--warmup,-w", f->options.warmup, "Untimed iterations per size")
      ->capture_default_str();
  cmd->add_option("--iters,-i", f->options.iters,
                  "Timed iterations per size (their mean is reported)")
      ->capture_default_str();
  cmd->add_option("--ranks-per-node", f->options.ranks_per_node,
                  "hierarchical: node groups of this many consecutive ranks; 0 = by host")
      ->capture_default_str();
  cmd->add_option("--threads,-t", f->threads,
                  "Compute threads per worker (casts, sums); 0 = cores / local workers")
      ->capture_default_str();
  cmd->add_option("--json", f->options.json_path,
                  "Write the JSON record (every row, the fits, the environment) here, atomically");
  cmd->add_option("--device", f->job.device,
                  "cpu | cuda | cuda:N: where messages live. The backend's own device is timed "
                  "as is (nccl: the GPU); others stage through it (docs/gpu.md)")
      ->capture_default_str();
  add_launch_flags(cmd, f->job.launch, "Launch");
  cmd->add_flag("--share-gpus", f->job.share_gpus,
                "--device cuda: let several local workers use one GPU when there are fewer GPUs "
                "than workers (Gloo stages through host memory; NCCL cannot)")
      ->group("Launch");
  cmd->callback([cmd, f, argv] { run_commbench_command(*cmd, *f, argv); });
}

}  // namespace dlscale::cli
