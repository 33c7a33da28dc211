#include "comm/backend.h"

#include "core/error.h"
#include "core/text.h"

namespace dlscale::comm {
namespace {

std::deque<BackendName>& name_table() {
  static std::deque<BackendName> names{
      {"gloo", "", true, ""},
      {"mpi", "(builds with MPI)", DLSCALE_WITH_MPI != 0, "built without MPI"},
      {"nccl", "(CUDA builds)", DLSCALE_WITH_NCCL != 0, "it needs a CUDA build"}};
  return names;
}

const BackendName* find(const std::string& name) {
  for (const BackendName& b : backends()) {
    if (b.name == name) return &b;
  }
  return nullptr;
}

}  // namespace

const std::deque<BackendName>& backends() { return name_table(); }

void add_backend_name(BackendName name) {
  DLSCALE_CHECK(!name.name.empty(), "a backend needs a name");
  DLSCALE_CHECK(find(name.name) == nullptr, "backend '{}' is taken", name.name);
  name_table().push_back(std::move(name));
}

bool backend_built(const std::string& name) {
  const BackendName* b = find(name);
  return b != nullptr && b->built;
}

std::string backend_names() {
  std::vector<std::string> names;
  for (const BackendName& b : backends()) {
    if (b.built) names.push_back(b.name);
  }
  return join(names, ", ");
}

std::string backend_help() {
  std::vector<std::string> parts;
  for (const BackendName& b : backends())
    parts.push_back(b.name + (b.help.empty() ? "" : " " + b.help));
  return join(parts, " | ");
}

void check_backend(const std::string& name) {
  const BackendName* b = find(name);
  DLSCALE_CHECK(b != nullptr, "unknown --backend '{}'; allowed: {}", name, backend_names());
  DLSCALE_CHECK(b->built,
                "--backend {} is not available in this build ({}; docs/gpu.md); allowed: {}", name,
                b->missing, backend_names());
}

}  // namespace dlscale::comm
