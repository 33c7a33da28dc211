#pragma once
// The communication backends, named once (torch-free): what `--backend`
// accepts, which this build has, and the names errors and --help list.
// libtorch/comm/session.cpp's table of factories makes each one's
// communicator; comm::register_backend() (libtorch/comm/session.h) adds a
// backend at run time.
#include <deque>
#include <string>

namespace dlscale::comm {

/// A --backend word: its phrase in --backend's help, and whether this build
/// has it (when not, why).
struct BackendName {
  std::string name;
  std::string help;  ///< e.g. "(CUDA builds)"; "" = none
  bool built = true;
  std::string missing;  ///< why this build lacks it, e.g. "it needs a CUDA build"
};

/// The backends, in --backend's help order; a deque, so that an addition
/// keeps the earlier entries where they were.
const std::deque<BackendName>& backends();
/// Adds a word; throws dlscale::Error when it is empty or taken.
void add_backend_name(BackendName name);
/// Whether this build has the backend `name` (false for an unknown name).
bool backend_built(const std::string& name);
/// The backends this build has, "gloo, mpi", for errors and --help.
std::string backend_names();
/// "gloo | mpi (builds with MPI) | nccl (CUDA builds)": --backend's help.
std::string backend_help();
/// Throws dlscale::Error naming what is unknown, or why this build lacks it,
/// unless `name` is a backend this build has.
void check_backend(const std::string& name);

}  // namespace dlscale::comm
