#include "core/line_reader.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
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

// A pipe whose writers are gone reads as ready on every poll(2): a launcher
// that kept polling it spun a core until its other children ended (the
// cluster launcher after one host's exit, 25 s of CPU in one drill). Once
// the end is read, the descriptor to poll is -1, which poll skips.
TEST(LineReader, StopsBeingPolledOnceItsWritersAreGone) {
  LinePipe pipe;
  EXPECT_EQ(pipe.reader.poll_fd(), pipe.reader.fd());
  put(pipe.write_fd, "last\n");
  pipe.close_write();
  pollfd p{pipe.reader.poll_fd(), POLLIN, 0};
  EXPECT_EQ(::poll(&p, 1, 0), 1);
  EXPECT_EQ(pipe.reader.read_lines(), (std::vector<std::string>{"last"}));
  EXPECT_EQ(pipe.reader.poll_fd(), -1);
  EXPECT_GE(pipe.reader.fd(), 0);  // still owned, closed with the reader
  p = {pipe.reader.poll_fd(), POLLIN, 0};
  EXPECT_EQ(::poll(&p, 1, 0), 0);  // nothing to report: a poll waits its timeout
  LineReader moved = std::move(pipe.reader);
  EXPECT_EQ(moved.poll_fd(), -1);
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
