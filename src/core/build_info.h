#pragma once
#include <string>

namespace dlscale {

/// Facts fixed when dlscale was built (generated file: cmake/write_build_info.cmake).
struct BuildInfo {
  std::string version;       ///< dlscale's version, e.g. "0.1.0"
  std::string git_revision;  ///< short hash, "-dirty" suffix for local changes, or "unknown"
  std::string build_type;    ///< CMake build type
  std::string compiler;      ///< compiler id and version
};

const BuildInfo& build_info();

}  // namespace dlscale
