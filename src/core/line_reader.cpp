#include "core/line_reader.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "core/error.h"

namespace dlscale {

LineReader::LineReader(LineReader&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), eof_(other.eof_), partial_(std::move(other.partial_)) {}

LineReader& LineReader::operator=(LineReader&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    eof_ = other.eof_;
    partial_ = std::move(other.partial_);
  }
  return *this;
}

LineReader::~LineReader() {
  if (fd_ >= 0) ::close(fd_);
}

std::vector<std::string> LineReader::read_lines(bool flush) {
  char buf[4096];
  ssize_t got = -1;
  while (fd_ >= 0 && (got = ::read(fd_, buf, sizeof(buf))) > 0) partial_.append(buf, static_cast<size_t>(got));
  if (fd_ >= 0 && got == 0) eof_ = true;
  std::vector<std::string> lines;
  size_t nl;
  while ((nl = partial_.find('\n')) != std::string::npos) {
    lines.push_back(partial_.substr(0, nl));
    partial_.erase(0, nl + 1);
  }
  if (flush && !partial_.empty()) lines.push_back(std::exchange(partial_, {}));
  return lines;
}

LinePipe::LinePipe(bool nonblocking_write) {
  int fds[2];
  DLSCALE_CHECK(::pipe2(fds, O_CLOEXEC) == 0, "cannot create a pipe: {}", std::strerror(errno));
  ::fcntl(fds[0], F_SETFL, O_NONBLOCK);
  if (nonblocking_write) ::fcntl(fds[1], F_SETFL, O_NONBLOCK);
  reader = LineReader(fds[0]);
  write_fd = fds[1];
}

void LinePipe::close_write() {
  if (write_fd >= 0) ::close(std::exchange(write_fd, -1));
}

}  // namespace dlscale
