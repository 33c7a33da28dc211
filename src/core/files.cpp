#include "core/files.h"

#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
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
int write_all(int fd, std::string_view content) {
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

namespace {

constexpr const char* kStepPlaceholder = "{step}";

/// The file `t` leads to, absolute with links and dots resolved.
std::string canonical_file(const OutputTarget& t) {
  return fs::weakly_canonical(fs::absolute(t.path)).string();
}

/// The step n such that `pattern` with every "{step}" replaced by n (as
/// std::to_string writes it) is `file`, if there is one.
std::optional<int64_t> pattern_step(const std::string& pattern, const std::string& file) {
  const std::string ph = kStepPlaceholder;
  std::optional<int64_t> step;
  size_t p = 0, f = 0;
  while (true) {
    const size_t next = pattern.find(ph, p);
    const std::string literal = pattern.substr(p, next == std::string::npos ? std::string::npos : next - p);
    if (file.compare(f, literal.size(), literal) != 0) return std::nullopt;
    f += literal.size();
    if (next == std::string::npos) return f == file.size() ? step : std::nullopt;
    size_t end = f;
    while (end < file.size() && end - f < 18 && std::isdigit(static_cast<unsigned char>(file[end]))) ++end;
    const std::string digits = file.substr(f, end - f);
    if (digits.empty() || (digits.size() > 1 && digits[0] == '0')) return std::nullopt;
    const int64_t n = std::stoll(digits);
    if (step && *step != n) return std::nullopt;
    step = n;
    f = end;
    p = next + ph.size();
  }
}

/// A checked output: its flag and the file it writes (or, for a pattern,
/// the canonical pattern and which steps it is written at).
struct CheckedOutput {
  std::string flag;
  std::string file;
  const OutputPath* spec = nullptr;
};

/// Whether output `a` may write the file `file` (a pattern: any file it expands to).
bool writes(const CheckedOutput& a, const std::string& file) {
  if (!a.spec->step_written) return a.file == file;
  const std::optional<int64_t> n = pattern_step(a.file, file);
  return n.has_value() && a.spec->step_written(*n);
}

}  // namespace

void check_output_paths(const std::vector<OutputPath>& outputs, const std::vector<InputPath>& inputs) {
  std::vector<CheckedOutput> files;
  for (const OutputPath& out : outputs) {
    if (out.path.empty()) continue;
    const OutputTarget t = check_output_path(out.path);
    if (t.stream) continue;  // a device or pipe may take several outputs
    CheckedOutput mine{out.flag, canonical_file(t), &out};
    for (const CheckedOutput& other : files) {
      const bool clash = other.spec->step_written ? writes(other, mine.file)
                         : mine.spec->step_written ? writes(mine, other.file)
                                                   : other.file == mine.file;
      // Named by the plain path of the two: the file a pattern would also write.
      const std::string& shown = mine.spec->step_written ? other.spec->path : out.path;
      DLSCALE_CHECK(!clash, "{} and {} both name '{}'{}: give each output its own file", other.flag,
                    out.flag, shown,
                    other.spec->step_written || mine.spec->step_written ? " (with {step} expanded)"
                                                                         : "");
    }
    files.push_back(std::move(mine));
  }
  for (const InputPath& in : inputs) {
    if (in.path.empty()) continue;
    struct stat st {};
    if (::stat(in.path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;  // its reader says why
    const std::string file = fs::weakly_canonical(fs::absolute(in.path)).string();
    for (const CheckedOutput& out : files) {
      if (out.flag == in.rewritten_by) continue;
      DLSCALE_CHECK(!writes(out, file), "{} would overwrite the {} file '{}': give it another file",
                    out.flag, in.flag, in.path);
    }
  }
}

int remove_stale_temporaries(const std::string& path) {
  const fs::path p(path);
  const std::string dir = parent_dir(path);
  const std::string name = p.filename().string();
  int removed = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string entry = e.path().filename().string();
    for (const char* suffix : {".tmp.", ".probe."}) {
      const std::string prefix = name + suffix;
      if (entry.size() <= prefix.size() || entry.compare(0, prefix.size(), prefix) != 0) continue;
      const std::string digits = entry.substr(prefix.size());
      if (digits.size() > 9 || !std::all_of(digits.begin(), digits.end(), ::isdigit)) continue;
      const auto pid = static_cast<pid_t>(std::stol(digits));
      if (pid <= 0 || pid == ::getpid() || ::kill(pid, 0) == 0 || errno != ESRCH) continue;
      std::error_code rm;
      if (e.is_regular_file(rm) && fs::remove(e.path(), rm)) ++removed;
    }
  }
  return removed;
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
  remove_stale_temporaries(t.path);  // of writers killed mid-write
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

namespace {

/// nftw's visitor for remove_tree: children come before their directory
/// (FTW_DEPTH), links are entries of their own (FTW_PHYS).
int remove_visited(const char* path, const struct stat* /*st*/, int /*type*/, struct FTW* /*ftw*/) {
  ::remove(path);  // what cannot be removed stays; remove_tree reports it
  return 0;
}

}  // namespace

bool remove_tree(const std::string& path) {
  struct stat st {};
  if (path.empty() || ::lstat(path.c_str(), &st) != 0) return true;
  ::nftw(path.c_str(), remove_visited, 16, FTW_DEPTH | FTW_PHYS);
  return ::lstat(path.c_str(), &st) != 0 && errno == ENOENT;
}

bool is_atomic_temporary(const std::string& name) {
  const size_t at = name.rfind(".tmp-");
  return at != std::string::npos && name.size() == at + 11;
}

AtomicFileWriter::AtomicFileWriter(std::string path) : path_(std::move(path)) {
  std::string tmpl = path_ + ".tmp-XXXXXX";
  fd_ = ::mkstemp(tmpl.data());
  if (fd_ < 0) throw_write_error(path_, errno);
  tmp_ = tmpl;
  ::fchmod(fd_, 0644);  // mkstemp creates 0600; data files are shared
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !tmp_.empty()) ::unlink(tmp_.c_str());
}

void AtomicFileWriter::write(std::string_view bytes) {
  DLSCALE_ASSERT(!committed_ && fd_ >= 0);
  size_ += bytes.size();
  if (const int err = write_all(fd_, bytes); err != 0) throw_write_error(path_, err);
}

void AtomicFileWriter::commit() {
  DLSCALE_ASSERT(!committed_ && fd_ >= 0);
  int err = ::fsync(fd_) == 0 ? 0 : errno;
  if (::close(fd_) != 0 && err == 0) err = errno;
  fd_ = -1;
  if (err == 0 && ::rename(tmp_.c_str(), path_.c_str()) != 0) err = errno;
  if (err != 0) throw_write_error(path_, err);
  committed_ = true;
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

void check_readable(const std::string& path) {
  const std::ifstream in(path, std::ios::binary);
  DLSCALE_CHECK(in.good(), "cannot read '{}': {}", path, std::strerror(errno));
}

std::string read_file(const std::string& path) {
  // A directory opens, and reads as nothing: name it instead.
  DLSCALE_CHECK(special_file_kind(path) != "a directory", "cannot read '{}': it is a directory",
                path);
  std::ifstream in(path, std::ios::binary);
  DLSCALE_CHECK(in.good(), "cannot read '{}': {}", path, std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  DLSCALE_CHECK(!in.bad(), "cannot read '{}': {}", path, std::strerror(errno));
  return ss.str();
}

}  // namespace dlscale
