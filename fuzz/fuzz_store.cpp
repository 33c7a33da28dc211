// libFuzzer harness: the rendezvous store's wire protocol. One server (with
// a secret) lives for the whole fuzzing run; each input is sent on a fresh
// connection, sometimes after a valid hello, and the harness reads whatever
// comes back. The server must neither crash nor stop serving: after every
// input a real client still gets its value back.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>

#include "comm/tcp_store.h"
#include "core/error.h"

namespace {

dlscale::comm::TcpStoreServer& server() {
  static dlscale::comm::TcpStoreServer s("127.0.0.1", 0, "fuzz-secret");
  return s;
}

dlscale::comm::TcpStore& client() {
  static dlscale::comm::TcpStore c("127.0.0.1", server().port(), std::chrono::milliseconds(2000),
                                   "fuzz-secret");
  return c;
}

std::string hello() {
  const std::string key = "dlscale-store/1";
  const std::string secret = "fuzz-secret";
  std::string f(1, '\x04');
  const uint32_t k = key.size();
  const uint32_t v = secret.size();
  f.append(reinterpret_cast<const char*>(&k), 4).append(key);
  f.append(reinterpret_cast<const char*>(&v), 4).append(secret);
  return f;
}

/// Whether a connect() that a signal interrupted (libFuzzer's timer: while
/// a loaded machine leaves the listen backlog full, the handshake waits for
/// a retransmission) completes: it goes on in the kernel, so wait for it.
bool connected_after_signal(int fd) {
  if (errno != EINTR) return false;
  pollfd p{fd, POLLOUT, 0};
  int ready = 0;
  do {
    ready = ::poll(&p, 1, 30000);
  } while (ready < 0 && errno == EINTR);
  int error = 0;
  socklen_t len = sizeof(error);
  if (ready != 1 || ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) != 0) return false;
  errno = error;
  return error == 0;
}

/// A fresh connection to the server. The harness closes first, so each
/// connection leaves a TIME_WAIT entry for 60 s; where the kernel does not
/// reuse those (net.ipv4.tcp_tw_reuse=0), one source address runs out of
/// ephemeral ports after a few thousand inputs. Each connection therefore
/// comes from the next of 65536 loopback addresses (127.1.0.0/16).
int connect_fresh() {
  static uint32_t next = 0;
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in from{};
  from.sin_family = AF_INET;
  from.sin_addr.s_addr = htonl((127u << 24) | (1u << 16) | (next++ & 0xffffu));
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(server().port());
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof(from)) != 0 ||
      (::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0 &&
       !connected_after_signal(fd))) {
    std::perror("fuzz_store: cannot connect to the store");
    std::abort();
  }
  return fd;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const int fd = connect_fresh();
  // The first byte chooses: garbage from the start, or after a valid hello.
  std::string bytes = size > 0 && (data[0] & 1) ? hello() : std::string();
  if (size > 1) bytes.append(reinterpret_cast<const char*>(data + 1), size - 1);
  [[maybe_unused]] const ssize_t sent = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  ::shutdown(fd, SHUT_WR);
  char buf[4096];
  pollfd p{fd, POLLIN, 0};
  // Replies end when the server closes; a GET may wait: give up after 50 ms.
  while (::poll(&p, 1, 50) > 0 && ::recv(fd, buf, sizeof(buf), 0) > 0) {
  }
  ::close(fd);
  try {
    client().set("alive", "yes");
    if (client().get("alive") != "yes") throw std::runtime_error("'alive' came back changed");
  } catch (const std::exception& e) {
    // Say why: libFuzzer's own report of the abort names only the signal.
    std::fprintf(stderr, "fuzz_store: the store stopped serving a real client: %s\n", e.what());
    std::abort();
  }
  return 0;
}
