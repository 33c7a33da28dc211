#pragma once
// The parent's end of a pipe from a child, read as lines: the local
// launcher reads its workers' status lines this way, the cluster launcher
// its node launchers' stderr.
#include <string>
#include <vector>

namespace dlscale {

/// Owns a non-blocking read descriptor (closed when it goes) and the
/// unfinished line read so far.
class LineReader {
 public:
  LineReader() = default;
  explicit LineReader(int fd) : fd_(fd) {}
  LineReader(LineReader&& other) noexcept;
  LineReader& operator=(LineReader&& other) noexcept;
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;
  ~LineReader();

  int fd() const { return fd_; }
  /// The fd to poll for more: -1 (which poll(2) skips) once the writers
  /// closed the pipe, which otherwise reads as ready on every poll.
  int poll_fd() const { return eof_ ? -1 : fd_; }
  /// Reads what the pipe holds without blocking and returns the complete
  /// lines, without their '\n'; with `flush`, an unfinished last line too.
  std::vector<std::string> read_lines(bool flush = false);

 private:
  int fd_ = -1;
  bool eof_ = false;  ///< a read returned 0: every writer closed the pipe
  std::string partial_;
};

/// A new pipe: `reader` is the non-blocking read end, `write_fd` the end a
/// child is given, non-blocking too when asked (a writer that would rather
/// drop a line than wait). Both are close-on-exec; the write end is closed
/// by close_write() (once the child holds its copy) or when the pipe goes.
struct LinePipe {
  LineReader reader;
  int write_fd = -1;
  explicit LinePipe(bool nonblocking_write = false);
  LinePipe(const LinePipe&) = delete;
  LinePipe& operator=(const LinePipe&) = delete;
  ~LinePipe() { close_write(); }
  void close_write();
};

}  // namespace dlscale
