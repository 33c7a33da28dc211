// The kernel's TCP counters, which the end-to-end tests compare every
// strategy's traffic with: on Linux they must report, and count exactly the
// bytes a loopback connection delivered.
#include "core/tcp_counters.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

namespace dlscale {
namespace {

/// A socket that closes with its owner.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

/// A loopback TCP connection: `client` connected to `server`.
struct Loopback {
  Fd listener{::socket(AF_INET, SOCK_STREAM, 0)};
  Fd client{::socket(AF_INET, SOCK_STREAM, 0)};
  Fd server{-1};
  Loopback() {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (::bind(listener.fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
        ::listen(listener.fd, 1) == 0 &&
        ::getsockname(listener.fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0 &&
        ::connect(client.fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
      server.fd = ::accept(listener.fd, nullptr, nullptr);
    }
  }
};

/// Reads from `fd` until `bytes` came or the connection ends.
void read_up_to(int fd, size_t bytes) {
  std::vector<char> buf(1 << 16);
  size_t got = 0;
  while (got < bytes) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
}

TEST(TcpCounters, CountTheBytesALoopbackConnectionDelivered) {
  Loopback link;
  ASSERT_GE(link.server.fd, 0) << "no loopback connection";
  const int client_fd = link.client.fd, server_fd = link.server.fd;
  const std::optional<int64_t> before = tcp_bytes_acked();
  ASSERT_TRUE(before.has_value()) << "this kernel reports no tcpi_bytes_acked (Linux >= 4.19 does)";
  constexpr size_t kBytes = 3 << 20;
  std::thread reader([&] { read_up_to(server_fd, kBytes); });
  const std::vector<char> data(kBytes, 'x');
  size_t sent = 0;
  while (sent < kBytes) {
    const ssize_t n = ::write(client_fd, data.data() + sent, kBytes - sent);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  if (sent < kBytes) ::shutdown(server_fd, SHUT_RDWR);  // the reader stops
  reader.join();
  ASSERT_EQ(sent, kBytes);
  // All was read, so all was delivered; its last acknowledgement may trail.
  int64_t counted = 0;
  for (int i = 0; i < 500 && counted < static_cast<int64_t>(kBytes); ++i) {
    counted = *tcp_bytes_acked() - *before;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(counted, static_cast<int64_t>(kBytes));
}

// A write returns once the kernel holds the bytes, before the peer has them:
// with the reader not reading yet, some of what was written is not
// acknowledged, and wait_tcp_sends_acked waits (here until the reader has
// read it all) so that the count then is exact.
TEST(TcpCounters, WaitingForTheSendQueuesMakesTheCountExact) {
  Loopback link;
  ASSERT_GE(link.server.fd, 0) << "no loopback connection";
  const int client_fd = link.client.fd, server_fd = link.server.fd;
  const std::optional<int64_t> before = tcp_bytes_acked();
  ASSERT_TRUE(before.has_value());
  // Write until the queues are full: the send buffer then holds bytes the
  // peer has not acknowledged.
  const std::vector<char> data(1 << 16, 'x');
  int64_t sent = 0;
  for (;;) {
    const ssize_t n = ::send(client_fd, data.data(), data.size(), MSG_DONTWAIT);
    if (n <= 0) break;
    sent += n;
  }
  ASSERT_GT(sent, 0);
  EXPECT_LT(*tcp_bytes_acked() - *before, sent);
  EXPECT_FALSE(wait_tcp_sends_acked(0.05));  // nobody reads
  std::thread reader([&] { read_up_to(server_fd, static_cast<size_t>(sent)); });
  EXPECT_TRUE(wait_tcp_sends_acked(30));
  EXPECT_EQ(*tcp_bytes_acked() - *before, sent);
  reader.join();
}

}  // namespace
}  // namespace dlscale
