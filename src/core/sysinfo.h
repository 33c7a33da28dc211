#pragma once
// What machine and software a result was measured on. Written into every
// result record so that a number is never separated from its context.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace dlscale {

struct SystemInfo {
  std::string hostname;
  std::string os;             ///< uname: sysname release machine
  std::string cpu_model;      ///< /proc/cpuinfo "model name"
  int logical_cores = 0;      ///< CPUs this process may run on (affinity mask)
  int online_cores = 0;       ///< CPUs online on the machine
  std::string blas;           ///< BLAS library actually loaded into the process
  /// OpenMP's wait settings in this process's environment
  /// ("GOMP_SPINCOUNT=10000", "OMP_WAIT_POLICY=passive"), "" for libgomp's
  /// own default (see default_openmp_wait)
  std::string openmp_wait;
  std::string dlscale_version;
  std::string git_revision;
  std::string build_type;
  std::string compiler;
};

/// CPUs this process may run on (its affinity mask); at least 1.
int available_cores();
/// Memory the kernel estimates can be allocated without swapping
/// (/proc/meminfo MemAvailable), in bytes; -1 when unknown.
int64_t available_memory_bytes();

/// Reads the facts above from the running system. Never throws: a fact that
/// cannot be read is "unknown".
SystemInfo collect_system_info();

/// The BLAS shared library mapped into this process (from /proc/self/maps),
/// e.g. "openblas-pthread (/usr/lib/.../openblas-pthread/libblas.so.3)";
/// "unknown" if none is loaded yet.
std::string loaded_blas_library();

nlohmann::json to_json(const SystemInfo& info);

/// libgomp's threads spin for about 300,000 rounds after a parallel region
/// before they sleep. Beside Debian's pthread OpenBLAS, whose GEMM threads
/// then wait for the cores, that cost BLAS-bound models up to half their
/// speed (bench/README.md, "OpenMP's wait policy"). Sets GOMP_SPINCOUNT to
/// kDefaultGompSpincount unless the environment sets it or
/// OMP_WAIT_POLICY; called by the front before it starts dlscale-torch,
/// whose libgomp reads it when it loads.
void default_openmp_wait();
inline constexpr const char* kDefaultGompSpincount = "10000";

/// Debian's pthread OpenBLAS starts its pool (a thread a core but one) when
/// it loads, and the new threads spin on sched_yield for about 0.1 s before
/// they sleep: 14% of the CPU of a dlscale-torch start on 2 cores, paid
/// again by every executed rank (mpirun, srun), for a pool that
/// set_compute_threads resizes before any training work anyway. Unless the
/// environment sizes OpenBLAS's pool itself (OPENBLAS_NUM_THREADS,
/// GOTO_NUM_THREADS or OMP_NUM_THREADS), sets OPENBLAS_NUM_THREADS=1 for the
/// load (its old value kept under kEnvSavedPrefix); called by the front
/// before it starts dlscale-torch, whose entry calls restore_blas_environment.
void defer_blas_pool();
/// The shared objects this process has loaded (the executable, the loader
/// and the vDSO included).
int loaded_object_count();
/// The threads of this process (/proc/self/task); -1 when unknown.
int thread_count();
/// Takes back what defer_blas_pool set, so that what dlscale-torch starts
/// sees the user's environment; returns whether it had set it.
bool restore_blas_environment();
/// What the front sets for dlscale-torch's load (OPENBLAS_NUM_THREADS,
/// LD_LIBRARY_PATH) keeps its value from before in kEnvSavedPrefix + the
/// variable's name ("-": none; "=VALUE"), which dlscale-torch's entry puts
/// back once the load has read it.
inline constexpr const char* kEnvSavedPrefix = "DLSCALE_SAVED_";

/// Debian's libtorch_cpu lists 17 OpenCV and FFmpeg libraries as needed but
/// takes no symbol from them, and loading them (and the ~210 libraries they
/// need) was about 40% of a dlscale-torch start's CPU. The build puts empty
/// stand-ins of those names in kUnusedLibsDir beside dlscale-torch
/// (scripts/libtorch_unused.sh). When TORCH_DIR holds that folder, puts it
/// first on LD_LIBRARY_PATH for the load (the old value kept under
/// kEnvSavedPrefix); returns whether it did. Called by the front before it starts
/// dlscale-torch, whose entry calls restore_library_path.
bool skip_unused_libraries(const std::string& torch_dir);
/// Takes back what skip_unused_libraries set, so that what dlscale-torch
/// starts sees the user's library path; returns whether it had set it.
bool restore_library_path();
inline constexpr const char* kUnusedLibsDir = "unused-libs";

}  // namespace dlscale
