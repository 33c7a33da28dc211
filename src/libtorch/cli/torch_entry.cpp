#include "libtorch/cli/torch_entry.h"

#include <c10/util/Exception.h>
#include <fmt/format.h>

#include <optional>
#include <string>

#include "cli/app.h"
#include "core/error.h"
#include "core/log.h"
#include "core/sysinfo.h"
#include "libtorch/launch/job.h"

namespace dlscale::cli {
namespace {

/// LibTorch's errors: out of memory (exit 4) or internal, with its message.
std::optional<ExitError> torch_error(const std::exception& e) {
  const auto* torch = dynamic_cast<const c10::Error*>(&e);
  if (torch == nullptr) return std::nullopt;
  const std::string msg = torch->what_without_backtrace();
  const bool oom = msg.find("out of memory") != std::string::npos ||
                   msg.find("DefaultCPUAllocator: can't allocate") != std::string::npos;
  return ExitError{oom ? kExitOutOfMemory : kExitInternal, "LibTorch: " + msg};
}

int run(int argc, char** argv) { return run_cli(argc, argv, torch_error); }

}  // namespace

int torch_main(int argc, char** argv) {
  const bool deferred = restore_blas_environment();  // OpenBLAS has read it (core/sysinfo.h)
  const bool skipped = restore_library_path();       // the loader has read it
  DLSCALE_LOG_DEBUG(
      "dlscale-torch: {} thread(s) after loading LibTorch, OpenBLAS's pool {}; {} shared objects "
      "loaded, LibTorch's unused libraries {}",
      thread_count(), deferred ? "deferred" : "as the environment sized it", loaded_object_count(),
      skipped ? "left out" : "loaded");
  launch::set_worker_entry(run);  // local workers: forks that run it
  return run(argc, argv);
}

}  // namespace dlscale::cli
