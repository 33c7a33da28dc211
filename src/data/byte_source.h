#pragma once
// Random-access bytes for the record indexers (tfrecord.cpp, tar_shards.cpp)
// and the encoded-image datasets (encoded_dataset.cpp):
// a file read with pread, or bytes already in memory. Internal to src/data.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "core/error.h"

namespace dlscale::data {

/// Bytes already in memory; the viewed buffer must outlive the source.
class MemoryBytes {
 public:
  explicit MemoryBytes(std::string_view bytes) : bytes_(bytes) {}
  uint64_t size() const { return bytes_.size(); }
  /// The `n` bytes at `offset` (the caller keeps offset + n <= size()).
  std::string_view read(uint64_t offset, size_t n, std::string& /*scratch*/) const {
    return bytes_.substr(offset, n);
  }

 private:
  std::string_view bytes_;
};

/// Bytes this process has read from data files through FileBytes (the
/// tests check that opening an indexed location reads no record).
inline std::atomic<uint64_t> g_file_bytes_read{0};

/// A file opened read-only (RAII); reads go through `scratch`.
class FileBytes {
 public:
  explicit FileBytes(std::string path) : path_(std::move(path)) {
    fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    DLSCALE_CHECK(fd_ >= 0, "cannot open '{}': {}", path_, std::strerror(errno));
    struct stat st {};
    const bool stat_ok = ::fstat(fd_, &st) == 0;
    const int err = errno;
    if (!stat_ok || !S_ISREG(st.st_mode)) {
      ::close(fd_);
      throw Error(fmt::format("cannot read '{}': {}", path_,
                              stat_ok ? "not a regular file" : std::strerror(err)));
    }
    size_ = static_cast<uint64_t>(st.st_size);
  }
  FileBytes(const FileBytes&) = delete;
  FileBytes& operator=(const FileBytes&) = delete;
  ~FileBytes() { ::close(fd_); }

  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }
  /// The `n` bytes at `offset` (the caller keeps offset + n <= size()),
  /// stored in `scratch`; throws dlscale::Error naming the file on a read
  /// error or when the file shrank.
  std::string_view read(uint64_t offset, size_t n, std::string& scratch) const {
    scratch.resize(n);
    size_t done = 0;
    while (done < n) {
      const ssize_t got =
          ::pread(fd_, scratch.data() + done, n - done, static_cast<off_t>(offset + done));
      if (got < 0 && errno == EINTR) continue;
      DLSCALE_CHECK(got >= 0, "cannot read '{}': {}", path_, std::strerror(errno));
      DLSCALE_CHECK(got > 0, "cannot read '{}': the file shrank while being read", path_);
      done += static_cast<size_t>(got);
    }
    g_file_bytes_read += n;
    return scratch;
  }

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

/// The `n` bytes at `offset` of `file`, as a string of their own.
inline std::string read_at(const FileBytes& file, uint64_t offset, uint64_t n) {
  std::string bytes;
  file.read(offset, static_cast<size_t>(n), bytes);  // fills `bytes`
  return bytes;
}

}  // namespace dlscale::data
