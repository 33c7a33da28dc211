#include "data/staging.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "core/clock.h"
#include "core/error.h"
#include "data/shard_index.h"

namespace dlscale::data {

namespace {

namespace fs = std::filesystem;

/// An exclusive flock on a file in the stage directory, released on scope exit.
class StageLock {
 public:
  explicit StageLock(const fs::path& dir) {
    const std::string path = (dir / ".dlscale-stage.lock").string();
    fd_ = ::open(path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
    if (fd_ < 0) throw_write_error(path, errno);  // a full disk is an I/O failure (exit 6)
    while (::flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
    }
  }
  ~StageLock() { ::close(fd_); }
  StageLock(const StageLock&) = delete;
  StageLock& operator=(const StageLock&) = delete;

 private:
  int fd_ = -1;
};

bool same_file_there(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  if (!fs::is_regular_file(to, ec)) return false;
  return fs::file_size(from, ec) == fs::file_size(to, ec) && !ec &&
         fs::last_write_time(from, ec) == fs::last_write_time(to, ec) && !ec;
}

/// Copies `from` to `to` through read/write, so that a full disk is told
/// apart from other failures (IoError "no space left", exit 6). Throws
/// naming the file.
void copy_contents(const fs::path& from, const fs::path& to) {
  const int in = ::open(from.c_str(), O_RDONLY | O_CLOEXEC);
  DLSCALE_CHECK(in >= 0, "--stage-dir: cannot read {}: {}", from.string(), std::strerror(errno));
  const int out = ::open(to.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out < 0) {
    const int err = errno;
    ::close(in);
    throw_write_error(to.string(), err);
  }
  std::vector<char> buf(size_t{1} << 20);
  int err = 0;
  while (err == 0) {
    const ssize_t n = ::read(in, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n < 0) err = errno;
      break;
    }
    for (ssize_t done = 0; done < n && err == 0;) {
      const ssize_t w = ::write(out, buf.data() + done, static_cast<size_t>(n - done));
      if (w < 0 && errno != EINTR) err = errno;
      if (w > 0) done += w;
    }
  }
  ::close(in);
  if (::close(out) != 0 && err == 0) err = errno;
  if (err != 0) throw_write_error(to.string(), err);
}

int64_t copy_one(const fs::path& from, const fs::path& to) {
  if (same_file_there(from, to)) return 0;
  std::error_code ec;
  fs::create_directories(to.parent_path(), ec);
  if (ec) throw_write_error(to.parent_path().string(), ec.value());
  const fs::path tmp = to.string() + ".staging";
  try {
    copy_contents(from, tmp);
  } catch (...) {
    fs::remove(tmp, ec);
    throw;
  }
  fs::last_write_time(tmp, fs::last_write_time(from, ec), ec);
  if (!ec) fs::rename(tmp, to, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    throw Error(fmt::format("--stage-dir: copying {} to {} failed: {}", from.string(), to.string(),
                            ec.message()));
  }
  return static_cast<int64_t>(fs::file_size(to, ec));
}

}  // namespace

StageResult stage_files(const FileList& files, const std::string& root,
                        const std::string& stage_dir) {
  const double start = now_seconds();
  std::error_code ec;
  if (!fs::exists(stage_dir, ec)) {
    fs::create_directories(stage_dir, ec);
    if (ec == std::errc::no_space_on_device) throw_write_error(stage_dir, ENOSPC);
    DLSCALE_CHECK(!ec, "--stage-dir {} does not exist and cannot be created: {}", stage_dir,
                  ec.message());
  }
  DLSCALE_CHECK(fs::is_directory(stage_dir, ec), "--stage-dir {} is not a directory", stage_dir);
  const bool root_is_dir = fs::is_directory(root, ec);
  const fs::path base = root_is_dir ? fs::path(root) : fs::path(root).parent_path();
  StageResult result;
  result.location = (root_is_dir ? fs::path(stage_dir) : fs::path(stage_dir) / fs::path(root).filename())
                        .lexically_normal()
                        .string();
  StageLock lock(stage_dir);
  for (const std::string f : files) {
    const fs::path rel = fs::relative(f, base, ec);
    DLSCALE_CHECK(!ec && !rel.empty() && *rel.begin() != "..", "--stage-dir: {} is not under {}", f,
                  base.string());
    result.bytes_copied += copy_one(f, fs::path(stage_dir) / rel);
    // A shard's index sidecar travels with it (its modification time too,
    // so it stays valid for the staged copy).
    if (fs::is_regular_file(index_path(f), ec)) {
      copy_one(index_path(f), fs::path(stage_dir) / (rel.string() + kIndexSuffix));
    }
  }
  result.seconds = now_seconds() - start;
  return result;
}

}  // namespace dlscale::data
