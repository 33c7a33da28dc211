#include "core/line_reader.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

namespace dlscale {
namespace {

void put(int fd, const std::string& s) { ASSERT_EQ(::write(fd, s.data(), s.size()), static_cast<ssize_t>(s.size())); }

// Lines come out whole however the writes split them; an unfinished line
// waits for its end, or comes out with flush.
TEST(LineReader, ReturnsCompleteLinesAndKeepsTheRest) {
  LinePipe pipe;
  EXPECT_TRUE(pipe.reader.read_lines().empty());  // nothing written: no wait, no line
  put(pipe.write_fd, "one\ntw");
  EXPECT_EQ(pipe.reader.read_lines(), (std::vector<std::string>{"one"}));
  put(pipe.write_fd, "o\n\nthr");
  EXPECT_EQ(pipe.reader.read_lines(), (std::vector<std::string>{"two", ""}));
  EXPECT_EQ(pipe.reader.read_lines(/*flush=*/true), (std::vector<std::string>{"thr"}));
  EXPECT_TRUE(pipe.reader.read_lines(true).empty());
}

TEST(LineReader, OwnsItsDescriptorAndTheWriteEndIsAsAsked) {
  int read_fd = -1;
  {
    LinePipe pipe;
    EXPECT_EQ(::fcntl(pipe.write_fd, F_GETFL) & O_NONBLOCK, 0);  // a child writes as usual
    EXPECT_NE(::fcntl(pipe.reader.fd(), F_GETFL) & O_NONBLOCK, 0);
    EXPECT_NE(::fcntl(pipe.write_fd, F_GETFD) & FD_CLOEXEC, 0);
    LineReader moved = std::move(pipe.reader);
    read_fd = moved.fd();
    EXPECT_EQ(pipe.reader.fd(), -1);
    pipe.close_write();
    EXPECT_EQ(pipe.write_fd, -1);
    EXPECT_GE(::fcntl(read_fd, F_GETFD), 0);
  }
  EXPECT_EQ(::fcntl(read_fd, F_GETFD), -1);  // closed with its owner
  LinePipe dropping(/*nonblocking_write=*/true);
  EXPECT_NE(::fcntl(dropping.write_fd, F_GETFL) & O_NONBLOCK, 0);
}

}  // namespace
}  // namespace dlscale
