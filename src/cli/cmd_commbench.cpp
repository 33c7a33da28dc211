// dlscale commbench: the collective micro-benchmark (flags -> options -> job).
// The flags are torch-free; the run is behind the executables' seam
// (cli/torch_commands.h).
#include <memory>

#include "cli/commands.h"
#include "cli/option_binding.h"
#include "cli/torch_commands.h"

namespace dlscale::cli {
void add_commbench_flags(CLI::App* cmd, CommbenchFlags& f) {
  add_options(cmd, f.options, "");
  cmd->add_option("--threads,-t", f.threads,
                  "Compute threads per worker (casts, sums); 0 = cores / local workers")
      ->capture_default_str();
  cmd->add_option("--device", f.job.device,
                  "cpu | cuda | cuda:N: where messages live. The backend's own device is timed "
                  "as is (nccl: the GPU); others stage through it (docs/gpu.md)")
      ->capture_default_str();
  add_launch_flags(cmd, f.job.launch, "Launch");
  cmd->add_flag("--share-gpus", f.job.share_gpus,
                "--device cuda: let several local workers use one GPU when there are fewer GPUs "
                "than workers (Gloo stages through host memory; NCCL cannot)")
      ->group("Launch");
}

void add_commbench_command(CLI::App& app, const std::vector<std::string>& argv) {
  auto f = std::make_shared<CommbenchFlags>();
  CLI::App* cmd = app.add_subcommand(
      "commbench",
      "Time collectives as the strategies use them, over any sizes (nccl-tests' table: size, "
      "count, type, time, algbw, busbw, #wrong), check every result, and fit time = alpha + "
      "bytes/B per operation. Launched like 'train': --workers N, mpirun, srun, --nnodes.");
  add_commbench_flags(cmd, *f);
  cmd->callback([cmd, f, argv] { run_commbench_command(*cmd, *f, argv); });
}

}  // namespace dlscale::cli
