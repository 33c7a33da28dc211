// The rendezvous store against hostile and careless clients: a wrong secret,
// garbage, malformed numbers, truncated frames, oversized fields and many
// idle connections each cost only their own connection; the job's clients
// keep being served.
#include "comm/tcp_store.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"

namespace dlscale::comm {
namespace {

using std::chrono::milliseconds;

/// A raw TCP connection to the store, speaking whatever it is told to.
class RawClient {
 public:
  explicit RawClient(uint16_t port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  }
  ~RawClient() { ::close(fd_); }
  bool connected() const { return connected_; }
  bool read_exact(void* data, size_t n) {
    auto* p = static_cast<char*>(data);
    while (n > 0) {
      pollfd pfd{fd_, POLLIN, 0};
      if (::poll(&pfd, 1, 2000) <= 0) return false;
      const ssize_t r = ::recv(fd_, p, n, 0);
      if (r <= 0) return false;
      p += r;
      n -= static_cast<size_t>(r);
    }
    return true;
  }
  void send_bytes(const std::string& bytes) {
    [[maybe_unused]] const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  }
  static std::string frame(uint8_t op, const std::string& key, const std::string& value) {
    std::string f(1, static_cast<char>(op));
    const uint32_t k = static_cast<uint32_t>(key.size());
    const uint32_t v = static_cast<uint32_t>(value.size());
    f.append(reinterpret_cast<const char*>(&k), 4).append(key);
    f.append(reinterpret_cast<const char*>(&v), 4).append(value);
    return f;
  }
  void hello(const std::string& secret) { send_bytes(frame(4, "dlscale-store/1", secret)); }
  /// The status byte of the next reply, or -1 if the server closed the
  /// connection (or said nothing within 2 s); reads the whole reply.
  int status() {
    unsigned char code = 0;
    if (!read_exact(&code, 1)) return -1;
    for (int field = 0; field < 2; ++field) {
      uint32_t n = 0;
      if (!read_exact(&n, 4)) return -1;
      std::string skip(n, '\0');
      if (!read_exact(skip.data(), n)) return -1;
    }
    return code;
  }
  /// True when the server has closed the connection (within 2 s).
  bool closed_by_server() {
    char c;
    pollfd p{fd_, POLLIN, 0};
    while (::poll(&p, 1, 2000) > 0) {
      if (::recv(fd_, &c, 1, 0) <= 0) return true;
    }
    return false;
  }

 private:
  int fd_;
  bool connected_ = false;
};

constexpr int kOk = 0;
constexpr int kBadRequest = 2;
constexpr int kDenied = 3;

TEST(TcpStoreHardening, OnlyTheJobsSecretIsServed) {
  TcpStoreServer server("127.0.0.1", 0, "s3cret");
  try {
    TcpStore wrong("127.0.0.1", server.port(), milliseconds(500), "guess");
    FAIL() << "a wrong secret was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("wrong job secret"), std::string::npos) << e.what();
  }
  RawClient raw(server.port());
  raw.send_bytes(RawClient::frame(1, "k", "v"));  // a SET before HELLO
  EXPECT_EQ(raw.status(), kDenied);
  EXPECT_TRUE(raw.closed_by_server());
  TcpStore good("127.0.0.1", server.port(), milliseconds(500), "s3cret");
  good.set("k", "v");
  EXPECT_EQ(good.get("k"), "v");
}

TEST(TcpStoreHardening, BadClientsLoseOnlyTheirConnection) {
  TcpStoreServer server("127.0.0.1", 0, "s");
  TcpStore good("127.0.0.1", server.port(), milliseconds(1000), "s");
  good.set("n", "not a number");
  // 300 idle connections, half of them never saying hello.
  std::vector<std::unique_ptr<RawClient>> idle;
  for (int i = 0; i < 300; ++i) {
    idle.push_back(std::make_unique<RawClient>(server.port()));
    ASSERT_TRUE(idle.back()->connected());
    if (i % 2 == 0) idle.back()->hello("s");
  }
  {  // garbage bytes instead of a hello
    RawClient c(server.port());
    std::mt19937 rng(7);
    std::string junk(4096, '\0');
    for (char& ch : junk) ch = static_cast<char>(rng());
    c.send_bytes(junk);
    EXPECT_TRUE(c.closed_by_server());
  }
  for (const auto& [op, key, value] : std::vector<std::tuple<uint8_t, std::string, std::string>>{
           {3, "n", "1"},             // ADD to a value that is not a number
           {3, "m", "12x"},           // ADD of something that is not one
           {3, "n2", "99999999999999999999"},  // out of range
           {2, "k", "soon"},          // GET with a wait that is not a number
           {2, "k", "-5"},            // or a negative one
           {9, "k", "v"}}) {          // an unknown request
    SCOPED_TRACE(std::to_string(op) + " " + key + " " + value);
    RawClient c(server.port());
    c.hello("s");
    ASSERT_EQ(c.status(), kOk);
    c.send_bytes(RawClient::frame(op, key, value));
    EXPECT_EQ(c.status(), kBadRequest);
    EXPECT_TRUE(c.closed_by_server());
  }
  {  // a value header of 100 MiB is refused before anything is allocated
    RawClient c(server.port());
    c.hello("s");
    ASSERT_EQ(c.status(), kOk);
    std::string f = RawClient::frame(1, "big", "");
    const uint32_t huge = 100u << 20;
    std::memcpy(f.data() + f.size() - 4, &huge, 4);
    c.send_bytes(f);
    EXPECT_TRUE(c.closed_by_server());
  }
  {  // a truncated frame, then the client goes away
    RawClient c(server.port());
    c.hello("s");
    ASSERT_EQ(c.status(), kOk);
    c.send_bytes(RawClient::frame(1, "half", "value").substr(0, 7));
  }
  // The job's own client is still served, values intact.
  EXPECT_EQ(good.add("counter", 2), 2);
  EXPECT_EQ(good.add("counter", 3), 5);
  EXPECT_EQ(good.get("n"), "not a number");
  TcpStore late("127.0.0.1", server.port(), milliseconds(1000), "s");
  EXPECT_EQ(late.get("counter"), "5");
}

// A connection that never says hello is dropped after 10 s: silent
// connections cannot hold the 1024 slots forever.
TEST(TcpStoreHardening, SilentConnectionsAreDropped) {
  TcpStoreServer server("127.0.0.1", 0, "s");
  RawClient silent(server.port());
  ASSERT_TRUE(silent.connected());
  const auto start = std::chrono::steady_clock::now();
  bool closed = false;
  for (int i = 0; i < 8 && !closed; ++i) closed = silent.closed_by_server();  // 2 s each
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(closed);
  EXPECT_GT(waited, 8.0);
  EXPECT_LT(waited, 14.0);
}

TEST(TcpStoreHardening, ValuesAndTheStoreAreBounded) {
  TcpStoreServer server("127.0.0.1", 0);
  {
    TcpStore c("127.0.0.1", server.port(), milliseconds(1000));
    EXPECT_THROW(c.set("v", std::string((1u << 20) + 1, 'x')), Error);  // over 1 MiB: dropped
  }
  TcpStore c("127.0.0.1", server.port(), milliseconds(1000));
  const std::string mib(1u << 20, 'x');
  int stored = 0;
  try {
    for (; stored < 80; ++stored) c.set("v" + std::to_string(stored), mib);
    FAIL() << "80 MiB were accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the store is full"), std::string::npos) << e.what();
  }
  EXPECT_GE(stored, 60);
  EXPECT_LT(stored, 64);
  TcpStore again("127.0.0.1", server.port(), milliseconds(1000));
  EXPECT_EQ(again.get("v0").size(), mib.size());  // what was stored stays
  // Counters count too: adds on fresh 4 KiB keys cannot grow the store past
  // its bound (once they could, and the fuzzer's client then found it full).
  const std::string long_key(4000, 'k');
  try {
    for (int i = 0; i < 2000; ++i) again.add(long_key + std::to_string(i), 1);
    FAIL() << "2000 counters on 4 KB keys were accepted in a full store";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the store is full"), std::string::npos) << e.what();
  }
  TcpStore last("127.0.0.1", server.port(), milliseconds(1000));
  last.set("v0", "small");  // replacing a value with a smaller one still works
  EXPECT_EQ(last.get("v0"), "small");
}

}  // namespace
}  // namespace dlscale::comm
