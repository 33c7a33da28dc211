// dlscale_tests runs dlscale's commands in forks of itself (tests/
// process_util.h's run_dlscale): this process has LibTorch loaded, and a
// fork runs dlscale-torch's entry at once, where executing the binary would
// load LibTorch again (about 1 s of CPU a run). What a fork cannot inherit
// safely it is not given: the process computes on one thread (no OpenMP
// pool, whose threads a fork would lack), and a process with more threads
// than it had at start executes the binary instead. The threads it has at
// start are OpenBLAS's, which stops them itself at fork (its atfork
// handler), as dlscale's own forked workers rely on (docs/launch.md).
#include "core/child_process.h"
#include "core/sysinfo.h"
#include "libtorch/cli/torch_entry.h"
#include "libtorch/compute/threads.h"
#include "process_util.h"

namespace dlscale::testing {
namespace {

int& threads_at_start() {
  static int threads = -1;
  return threads;
}

/// No thread but those it started with (OpenBLAS's), and one compute thread.
bool may_fork() {
  const int now = thread_count();
  return now > 0 && now <= threads_at_start() && compute_threads() == 1;
}

int run_torch_entry(int argc, char** argv) {
  // Executed workers, a sweep's runs and hosts start dlscale-torch, not
  // this test binary.
  set_self_executable(DLSCALE_TORCH_BINARY);
  return cli::torch_main(argc, argv);
}

const bool kRegistered = [] {
  set_compute_threads(1);
  threads_at_start() = thread_count();
  forked_entry() = ForkedEntry{run_torch_entry, may_fork};
  return true;
}();

}  // namespace
}  // namespace dlscale::testing
