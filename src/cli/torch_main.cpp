// dlscale-torch: dlscale with LibTorch. `dlscale` hands it the commands that
// train or benchmark (cli/torch_commands.h); it runs every command itself.
#include <c10/util/Exception.h>

#include <optional>
#include <string>

#include "cli/app.h"
#include "core/error.h"
#include "launch/job.h"

namespace {

/// LibTorch's errors: out of memory (exit 4) or internal, with its message.
std::optional<dlscale::cli::ExitError> torch_error(const std::exception& e) {
  const auto* torch = dynamic_cast<const c10::Error*>(&e);
  if (torch == nullptr) return std::nullopt;
  const std::string msg = torch->what_without_backtrace();
  const bool oom = msg.find("out of memory") != std::string::npos ||
                   msg.find("DefaultCPUAllocator: can't allocate") != std::string::npos;
  return dlscale::cli::ExitError{oom ? dlscale::kExitOutOfMemory : dlscale::kExitInternal, "LibTorch: " + msg};
}

int run(int argc, char** argv) { return dlscale::cli::run_cli(argc, argv, torch_error); }

}  // namespace

int main(int argc, char** argv) {
  dlscale::launch::set_worker_entry(run);  // local workers: forks that run it
  return run(argc, argv);
}
