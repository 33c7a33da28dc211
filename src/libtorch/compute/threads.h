#pragma once
#include <string>

namespace dlscale {

/// Sets the number of intra-op compute threads for LibTorch (OpenMP) and for
/// the BLAS library when it keeps its own thread pool (OpenBLAS-pthread), so
/// that `--threads T` really means T busy cores. Inter-op threads are set to 1
/// on first use (dlscale runs one model per process). A no-op when both pools
/// already have `threads`. Process-wide: ranks run as threads must agree.
void set_compute_threads(int threads);

/// LibTorch's current intra-op thread count.
int compute_threads();

/// The BLAS library's own thread count, or -1 if it has no such setting.
int blas_threads();

/// The BLAS library's configuration (OpenBLAS: version, build options and the
/// kernel core chosen for this CPU), or "" when not available.
std::string blas_config();

}  // namespace dlscale
