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
#include <cstdlib>
#include <memory>
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

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(server().port());
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) std::abort();
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
  client().set("alive", "yes");
  if (client().get("alive") != "yes") std::abort();
  return 0;
}
