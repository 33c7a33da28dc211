#include "core/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace dlscale {
namespace fs = std::filesystem;

namespace {

std::string parent_dir(const std::string& path) {
  const fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

}  // namespace

void check_output_path(const std::string& path) {
  DLSCALE_CHECK(!path.empty(), "output path is empty");
  std::error_code ec;
  DLSCALE_CHECK(!fs::is_directory(path, ec), "output path '{}' is a directory, expected a file",
                path);
  const std::string dir = parent_dir(path);
  DLSCALE_CHECK(fs::is_directory(dir, ec), "cannot write '{}': directory '{}' does not exist",
                path, dir);
  DLSCALE_CHECK(::access(dir.c_str(), W_OK) == 0, "cannot write '{}': directory '{}' is not writable",
                path, dir);
  if (fs::exists(path, ec)) {
    DLSCALE_CHECK(::access(path.c_str(), W_OK) == 0, "cannot write '{}': file is not writable",
                  path);
  }
}

void write_file_atomic(const std::string& path, const std::string& content) {
  check_output_path(path);
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  DLSCALE_CHECK(fd >= 0, "cannot write '{}': {}", tmp, std::strerror(errno));
  const char* p = content.data();
  size_t left = content.size();
  int err = 0;
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      err = errno;
      break;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (err == 0 && ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err == 0 && ::rename(tmp.c_str(), path.c_str()) != 0) err = errno;
  if (err != 0) {
    ::unlink(tmp.c_str());
    throw Error(fmt::format("cannot write '{}': {}", path, std::strerror(err)));
  }
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  DLSCALE_CHECK(in.good(), "cannot read '{}': {}", path, std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace dlscale
