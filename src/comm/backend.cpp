#include "comm/backend.h"

#include "core/error.h"

namespace dlscale::comm {
namespace {

constexpr EnumNames<Backend, 3> kBackends{
    "--backend", {{{Backend::kGloo, "gloo"}, {Backend::kMpi, "mpi"}, {Backend::kNccl, "nccl"}}}};

}  // namespace

const EnumNames<Backend, 3>& enum_names(Backend) { return kBackends; }

bool backend_built(Backend backend) {
  switch (backend) {
    case Backend::kGloo: return true;
    case Backend::kMpi: return DLSCALE_WITH_MPI != 0;
    case Backend::kNccl: return DLSCALE_WITH_NCCL != 0;
  }
  return false;
}

std::string backend_names() {
  std::string names;
  for (const auto& [backend, name] : kBackends.entries) {
    if (backend_built(backend)) names += (names.empty() ? "" : ", ") + std::string(name);
  }
  return names;
}

Backend parse_backend(const std::string& name) {
  Backend backend = Backend::kGloo;
  try {
    backend = kBackends.parse(name);
  } catch (const Error&) {
    throw Error(fmt::format("unknown --backend '{}'; allowed: {}", name, backend_names()));
  }
  DLSCALE_CHECK(backend_built(backend), "--backend {} is not available in this build ({}; docs/gpu.md); allowed: {}",
                name, backend == Backend::kNccl ? "it needs a CUDA build" : "built without MPI",
                backend_names());
  return backend;
}

}  // namespace dlscale::comm
