#include "data/staging.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/clock.h"
#include "core/error.h"

namespace dlscale::data {

namespace {

namespace fs = std::filesystem;

/// An exclusive flock on a file in the stage directory, released on scope exit.
class StageLock {
 public:
  explicit StageLock(const fs::path& dir) {
    const std::string path = (dir / ".dlscale-stage.lock").string();
    fd_ = ::open(path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
    DLSCALE_CHECK(fd_ >= 0, "--stage-dir: cannot create {}: {}", path, std::strerror(errno));
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

int64_t copy_one(const fs::path& from, const fs::path& to) {
  if (same_file_there(from, to)) return 0;
  std::error_code ec;
  fs::create_directories(to.parent_path(), ec);
  DLSCALE_CHECK(!ec, "--stage-dir: cannot create {}: {}", to.parent_path().string(), ec.message());
  const fs::path tmp = to.string() + ".staging";
  fs::copy_file(from, tmp, fs::copy_options::overwrite_existing, ec);
  if (!ec) fs::last_write_time(tmp, fs::last_write_time(from, ec), ec);
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

StageResult stage_files(const std::vector<std::string>& files, const std::string& root,
                        const std::string& stage_dir) {
  const double start = now_seconds();
  std::error_code ec;
  fs::create_directories(stage_dir, ec);
  DLSCALE_CHECK(fs::is_directory(stage_dir, ec), "--stage-dir {}: not a directory{}", stage_dir,
                ec ? ": " + ec.message() : "");
  const bool root_is_dir = fs::is_directory(root, ec);
  const fs::path base = root_is_dir ? fs::path(root) : fs::path(root).parent_path();
  StageResult result;
  result.location = (root_is_dir ? fs::path(stage_dir) : fs::path(stage_dir) / fs::path(root).filename())
                        .lexically_normal()
                        .string();
  StageLock lock(stage_dir);
  for (const std::string& f : files) {
    const fs::path rel = fs::relative(f, base, ec);
    DLSCALE_CHECK(!ec && !rel.empty() && *rel.begin() != "..", "--stage-dir: {} is not under {}", f,
                  base.string());
    result.bytes_copied += copy_one(f, fs::path(stage_dir) / rel);
  }
  result.seconds = now_seconds() - start;
  return result;
}

}  // namespace dlscale::data
