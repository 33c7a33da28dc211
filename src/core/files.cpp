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

/// Writes all of `content` to `fd`; returns 0 or the errno of the failure.
int write_all(int fd, const std::string& content) {
  const char* p = content.data();
  size_t left = content.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  return 0;
}

/// A file to be created or replaced at `path`: its directory must exist and
/// take a new file (probed with a file created and removed at once).
void check_file_target(const std::string& shown, const std::string& path) {
  const std::string dir = parent_dir(path);
  std::error_code ec;
  DLSCALE_CHECK(fs::is_directory(dir, ec), "cannot write '{}': directory '{}' does not exist",
                shown, dir);
  DLSCALE_CHECK(::access(dir.c_str(), W_OK) == 0,
                "cannot write '{}': directory '{}' is not writable", shown, dir);
  const std::string probe = path + ".probe." + std::to_string(::getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  DLSCALE_CHECK(fd >= 0, "cannot write '{}': no file can be created in '{}': {}", shown, dir,
                std::strerror(errno));
  ::close(fd);
  ::unlink(probe.c_str());
  if (fs::exists(path, ec)) {
    DLSCALE_CHECK(::access(path.c_str(), W_OK) == 0, "cannot write '{}': file is not writable",
                  shown);
  }
}

/// Opens a device or pipe for writing without blocking on a FIFO that has
/// no reader yet (waits up to `wait_s` seconds for one).
int open_stream(const std::string& shown, const std::string& path, double wait_s) {
  for (int tries = 0;; ++tries) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd >= 0) {
      ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
      return fd;
    }
    if (errno != ENXIO || tries * 0.05 >= wait_s) {
      throw Error(fmt::format(
          "cannot write '{}': {}", shown,
          errno == ENXIO ? "it is a pipe and no process is reading it" : std::strerror(errno)));
    }
    ::usleep(50000);
  }
}

}  // namespace

OutputTarget resolve_output_path(const std::string& path) {
  DLSCALE_CHECK(!path.empty(), "output path is empty");
  struct stat st {};
  OutputTarget t;
  t.path = path;
  if (::lstat(path.c_str(), &st) != 0) return t;  // nothing there yet: a new file
  if (S_ISLNK(st.st_mode)) {
    if (::stat(path.c_str(), &st) != 0) {
      // A dangling link: create the file it names (relative to the link).
      const fs::path target = fs::read_symlink(path);
      t.path = (target.is_absolute() ? target : fs::path(path).parent_path() / target).string();
      return t;
    }
    if (S_ISREG(st.st_mode)) t.path = fs::canonical(path).string();
  }
  if (S_ISREG(st.st_mode)) return t;
  DLSCALE_CHECK(!S_ISDIR(st.st_mode), "output path '{}' is a directory, expected a file", path);
  DLSCALE_CHECK(S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode),
                "output path '{}' is a {}; give a regular file, a character device or a pipe", path,
                S_ISSOCK(st.st_mode) ? "socket" : "block device");
  // Not resolved: opened through the link, /dev/stdout -> /proc/self/fd/1 -> pipe.
  t.stream = true;
  return t;
}

OutputTarget check_output_path(const std::string& path) {
  const OutputTarget t = resolve_output_path(path);
  if (t.stream) {
    DLSCALE_CHECK(::access(path.c_str(), W_OK) == 0, "cannot write '{}': not writable", path);
  } else {
    check_file_target(path, t.path);
  }
  return t;
}

void check_output_paths(const std::vector<std::pair<std::string, std::string>>& outputs) {
  std::vector<std::pair<std::string, std::string>> files;  // flag, the file it writes
  for (const auto& [flag, path] : outputs) {
    if (path.empty()) continue;
    const OutputTarget t = check_output_path(path);
    if (t.stream) continue;
    const std::string file = fs::weakly_canonical(fs::absolute(t.path)).string();
    for (const auto& [other_flag, other] : files) {
      DLSCALE_CHECK(other != file, "{} and {} both name '{}': give each output its own file", other_flag,
                    flag, path);
    }
    files.emplace_back(flag, file);
  }
}

void write_file_atomic(const std::string& path, const std::string& content) {
  const OutputTarget t = resolve_output_path(path);
  if (t.stream) {
    const int fd = open_stream(path, t.path, 2.0);
    const int err = write_all(fd, content);
    ::close(fd);
    if (err != 0) throw_write_error(path, err);
    return;
  }
  check_file_target(path, t.path);
  const std::string tmp = t.path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw_write_error(tmp, errno);
  int err = write_all(fd, content);
  if (err == 0 && ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err == 0 && ::rename(tmp.c_str(), t.path.c_str()) != 0) err = errno;
  if (err != 0) {
    ::unlink(tmp.c_str());
    throw_write_error(path, err);
  }
}

void throw_write_error(const std::string& path, int err) {
  if (err == ENOSPC || err == EDQUOT) {
    throw IoError(fmt::format("cannot write '{}': no space left on the device{}", path,
                              err == EDQUOT ? " (disk quota exceeded)" : ""));
  }
  if (err == EIO) throw IoError(fmt::format("cannot write '{}': input/output error of the device", path));
  throw Error(fmt::format("cannot write '{}': {}", path, std::strerror(err)));
}

std::string special_file_kind(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode)) return "";
  return S_ISDIR(st.st_mode)    ? "a directory"
         : S_ISCHR(st.st_mode)  ? "a character device"
         : S_ISBLK(st.st_mode)  ? "a block device"
         : S_ISFIFO(st.st_mode) ? "a named pipe"
                                : "a socket";
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  DLSCALE_CHECK(in.good(), "cannot read '{}': {}", path, std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace dlscale
