#pragma once
// The communication backends, named once (torch-free): what `--backend`
// accepts, which this build has, and the names errors and --help list.
// libtorch/comm/session.cpp makes each one's communicator.
#include <string>

#include "core/enum_names.h"

namespace dlscale::comm {

enum class Backend { kGloo, kMpi, kNccl };
const EnumNames<Backend, 3>& enum_names(Backend);

/// Whether this build has `backend` (gloo always; mpi with DLSCALE_WITH_MPI,
/// nccl in a CUDA build with DLSCALE_WITH_NCCL).
bool backend_built(Backend backend);
/// The backends this build has, "gloo, mpi", for errors and --help.
std::string backend_names();
/// The backend `name` names, when this build has it; else dlscale::Error
/// naming what is unknown or why it is missing.
Backend parse_backend(const std::string& name);

}  // namespace dlscale::comm
