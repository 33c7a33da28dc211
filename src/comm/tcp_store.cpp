#include "comm/tcp_store.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <optional>

#include "core/error.h"
#include "core/log.h"

namespace dlscale::comm {
namespace {

enum Op : uint8_t { kSet = 1, kGet = 2, kAdd = 3, kHello = 4 };
enum Status : uint8_t { kOk = 0, kTimeout = 1, kBadRequest = 2, kDenied = 3 };
constexpr uint32_t kMaxKey = 4096;
constexpr uint32_t kMaxValue = 1u << 20;
constexpr size_t kMaxStoreBytes = 64u << 20;
constexpr size_t kMaxClients = 1024;
constexpr int64_t kMaxWaitMs = 24LL * 3600 * 1000;
constexpr const char* kProtocol = "dlscale-store/1";

/// The decimal integer `s` is, or nothing (no exceptions: peers send garbage).
std::optional<int64_t> parse_int(const std::string& s) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

bool write_all(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool read_all(int fd, void* data, size_t n) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t r = ::recv(fd, p, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

bool write_field(int fd, const std::string& s) {
  const uint32_t n = static_cast<uint32_t>(s.size());
  return write_all(fd, &n, sizeof(n)) && write_all(fd, s.data(), s.size());
}

bool write_message(int fd, uint8_t code, const std::string& key, const std::string& value) {
  return write_all(fd, &code, 1) && write_field(fd, key) && write_field(fd, value);
}

bool read_message(int fd, uint8_t* code, std::string* key, std::string* value,
                  bool* too_large = nullptr) {
  if (!read_all(fd, code, 1)) return false;
  uint32_t n = 0;
  if (!read_all(fd, &n, sizeof(n))) return false;
  if (n > kMaxKey) {
    if (too_large != nullptr) *too_large = true;
    return false;
  }
  key->resize(n);
  if (!read_all(fd, key->data(), n) || !read_all(fd, &n, sizeof(n))) return false;
  if (n > kMaxValue) {
    if (too_large != nullptr) *too_large = true;
    return false;
  }
  value->resize(n);
  return read_all(fd, value->data(), n);
}

std::string peer_name(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof(a);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return "?";
  char host[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &a.sin_addr, host, sizeof(host));
  return fmt::format("{}:{}", host, ntohs(a.sin_port));
}

sockaddr_in resolve(const std::string& host, uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &res);
  DLSCALE_CHECK(rc == 0 && res != nullptr, "cannot resolve master address '{}': {}", host,
                ::gai_strerror(rc));
  sockaddr_in addr = *reinterpret_cast<sockaddr_in*>(res->ai_addr);
  ::freeaddrinfo(res);
  addr.sin_port = htons(port);
  return addr;
}

}  // namespace

TcpStoreServer::TcpStoreServer(const std::string& host, uint16_t port, std::string secret,
                               bool serve_now)
    : secret_(std::move(secret)) {
  const sockaddr_in addr = resolve(host, port);
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  DLSCALE_CHECK(listen_fd_ >= 0, "cannot create socket: {}", std::strerror(errno));
  const int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(listen_fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(listen_fd_, 512) != 0) {
    const int err = errno;
    ::close(listen_fd_);
    throw Error(fmt::format("cannot listen on {}:{} for rendezvous: {}", host, port,
                            std::strerror(err)));
  }
  sockaddr_in bound{};
  socklen_t len = sizeof(bound);
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&bound), &len);
  port_ = ntohs(bound.sin_port);
  if (serve_now) serve();
}

void TcpStoreServer::serve() {
  if (!accept_thread_.joinable()) accept_thread_ = std::thread([this] { accept_loop(); });
}

TcpStoreServer::~TcpStoreServer() {
  stopping_ = true;
  ::shutdown(listen_fd_, SHUT_RDWR);
  if (accept_thread_.joinable()) accept_thread_.join();
  ::close(listen_fd_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Client& c : clients_) ::shutdown(c.fd, SHUT_RDWR);
    cv_.notify_all();
  }
  for (Client& c : clients_) {
    c.thread.join();
    ::close(c.fd);
  }
}

void TcpStoreServer::accept_loop() {
  while (!stopping_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    admit(fd);
  }
}

void TcpStoreServer::warn(const std::string& what) {
  // A flood of bad clients must not flood the log: the first few, then one
  // line per thousand.
  const int64_t n = ++refused_;
  if (n <= 10 || n % 1000 == 0) {
    DLSCALE_LOG_WARN("rendezvous store: {}{}", what,
                     n == 10 ? " (further bad clients: one line per 1000)" : "");
  }
}

void TcpStoreServer::reap_finished() {
  for (auto it = clients_.begin(); it != clients_.end();) {
    if (*it->done) {
      it->thread.join();
      ::close(it->fd);
      it = clients_.erase(it);
    } else {
      ++it;
    }
  }
}

void TcpStoreServer::admit(int fd) {
  std::lock_guard<std::mutex> lock(mu_);
  reap_finished();
  if (stopping_ || clients_.size() >= kMaxClients) {
    if (!stopping_) {
      warn(fmt::format("refused a connection from {}: {} connections are open", peer_name(fd),
                       clients_.size()));
    }
    ::close(fd);
    return;
  }
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  Client c;
  c.fd = fd;
  c.done = std::make_shared<std::atomic<bool>>(false);
  c.thread = std::thread([this, fd, done = c.done] {
    serve(fd);
    ::shutdown(fd, SHUT_RDWR);  // the client sees the end now; the fd is closed when reaped
    *done = true;
  });
  clients_.push_back(std::move(c));
}

bool TcpStoreServer::execute(uint8_t op, const std::string& key, const std::string& value,
                             uint8_t* status, std::string* reply) {
  std::unique_lock<std::mutex> lock(mu_);
  if (op == kSet) {
    const auto it = data_.find(key);
    const size_t old = it == data_.end() ? 0 : it->first.size() + it->second.size();
    if (data_bytes_ - old + key.size() + value.size() > kMaxStoreBytes) {
      *reply = "the store is full (64 MiB)";
      return false;
    }
    data_bytes_ = data_bytes_ - old + key.size() + value.size();
    data_[key] = value;
    cv_.notify_all();
  } else if (op == kGet) {
    const std::optional<int64_t> ms = parse_int(value);
    if (!ms || *ms < 0 || *ms > kMaxWaitMs) {
      *reply = "the wait is not a number of milliseconds in [0, 1 day]";
      return false;
    }
    const bool found = cv_.wait_for(lock, std::chrono::milliseconds(*ms), [&] {
      return stopping_ || data_.count(key) > 0;
    }) && data_.count(key) > 0;
    if (found) {
      *reply = data_[key];
    } else {
      *status = kTimeout;
    }
  } else if (op == kAdd) {
    const auto it = data_.find(key);
    const std::optional<int64_t> delta = parse_int(value);
    const std::optional<int64_t> have = it == data_.end() ? 0 : parse_int(it->second);
    int64_t sum = 0;
    if (!delta || !have || __builtin_add_overflow(*have, *delta, &sum)) {
      *reply = "add needs integers (and a sum that fits 64 bits)";
      return false;
    }
    const std::string total = std::to_string(sum);
    const size_t old = it == data_.end() ? 0 : it->first.size() + it->second.size();
    if (data_bytes_ - old + key.size() + total.size() > kMaxStoreBytes) {
      *reply = "the store is full (64 MiB)";  // counters on fresh 4 KiB keys count too
      return false;
    }
    data_bytes_ = data_bytes_ - old + key.size() + total.size();
    data_[key] = *reply = total;
    cv_.notify_all();
  } else {
    *reply = fmt::format("unknown request {}", static_cast<int>(op));
    return false;
  }
  return true;
}

void TcpStoreServer::serve(int fd) {
  uint8_t op = 0;
  std::string key, value;
  // The first message must be HELLO with the job's secret, within 10 s: a
  // connection that says nothing must not hold one of the slots for good.
  timeval hello_deadline{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &hello_deadline, sizeof(hello_deadline));
  bool too_large = false;
  if (!read_message(fd, &op, &key, &value, &too_large)) {
    // Something that is not a greeting (op 0 = nothing arrived, a port probe).
    if (op != 0 || too_large) {
      std::lock_guard<std::mutex> lock(mu_);
      warn(fmt::format("refused {}: not a dlscale worker (a malformed greeting)", peer_name(fd)));
    }
    return;
  }
  if (op != kHello || key != kProtocol || value != secret_) {
    write_message(fd, kDenied, kProtocol, "");
    std::lock_guard<std::mutex> lock(mu_);
    warn(fmt::format("refused {}: {}", peer_name(fd),
                     op == kHello && key == kProtocol ? "wrong job secret" : "not a dlscale worker"));
    return;
  }
  if (!write_message(fd, kOk, kProtocol, "")) return;
  const timeval no_deadline{0, 0};  // a worker may wait as long as the job runs
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &no_deadline, sizeof(no_deadline));
  while (!stopping_) {
    too_large = false;
    if (!read_message(fd, &op, &key, &value, &too_large)) {
      if (too_large) {
        std::lock_guard<std::mutex> lock(mu_);
        warn(fmt::format("dropped {}: a key over 4 KiB or a value over 1 MiB", peer_name(fd)));
      }
      return;  // closed, truncated or oversized: the client is gone
    }
    uint8_t status = kOk;
    std::string reply;
    const bool ok = execute(op, key, value, &status, &reply);
    if (!write_message(fd, ok ? status : static_cast<uint8_t>(kBadRequest), key, reply) || !ok) {
      if (!ok) {
        std::lock_guard<std::mutex> lock(mu_);
        warn(fmt::format("dropped {}: {}", peer_name(fd), reply));
      }
      return;
    }
  }
}

TcpStore::TcpStore(const std::string& host, uint16_t port, std::chrono::milliseconds timeout,
                   const std::string& secret)
    : host_(host), port_(port), timeout_(timeout) {
  const sockaddr_in addr = resolve(host, port);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string last_error;
  while (true) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    DLSCALE_CHECK(fd_ >= 0, "cannot create socket: {}", std::strerror(errno));
    if (::connect(fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0) break;
    last_error = std::strerror(errno);
    ::close(fd_);
    fd_ = -1;
    // The network's failure, not the user's input (docs/errors.md): exit 5,
    // as when the link goes down after the rendezvous.
    if (std::chrono::steady_clock::now() >= deadline) {
      throw PeerFailure(fmt::format("cannot reach the rendezvous store at {}:{} within {} ms: {}",
                                    host, port, timeout.count(), last_error));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  uint8_t status = 0;
  std::string key, reply;
  const bool answered = write_message(fd_, kHello, kProtocol, secret) &&
                        read_message(fd_, &status, &key, &reply);
  if (!answered || status != kOk) {
    ::close(fd_);
    fd_ = -1;
    throw Error(fmt::format(
        "the rendezvous store at {}:{} refused this process: {} (every process of a job needs "
        "the same DLSCALE_JOB_SECRET; docs/launch.md)",
        host, port, answered ? "wrong job secret" : "it closed the connection"));
  }
}

TcpStore::~TcpStore() {
  if (fd_ >= 0) ::close(fd_);
}

namespace {

/// A worker that never set its key: the peers' failure, not the user's
/// input (exit 5, docs/errors.md), as the network's failures below.
[[noreturn]] void throw_not_set(const std::string& key, std::chrono::milliseconds timeout) {
  throw PeerFailure(fmt::format("rendezvous: key '{}' was not set within {} ms (a worker missing?)", key,
                                timeout.count()));
}

}  // namespace

std::string TcpStore::request(uint8_t op, const std::string& key, const std::string& value,
                              bool* timed_out) {
  uint8_t status = 0;
  std::string rkey, reply;
  if (!write_message(fd_, op, key, value) || !read_message(fd_, &status, &rkey, &reply)) {
    throw PeerFailure(
        fmt::format("lost the connection to the rendezvous store at {} (master gone?)", address()));
  }
  DLSCALE_CHECK(status != kBadRequest, "the rendezvous store at {} refused a request: {}",
                address(), reply);
  if (timed_out != nullptr) *timed_out = status == kTimeout;
  return reply;
}

void TcpStore::set(const std::string& key, const std::string& value) {
  request(kSet, key, value, nullptr);
}

std::string TcpStore::get(const std::string& key) {
  bool timed_out = false;
  std::string v = request(kGet, key, std::to_string(timeout_.count()), &timed_out);
  if (timed_out) throw_not_set(key, timeout_);
  return v;
}

int64_t TcpStore::add(const std::string& key, int64_t delta) {
  const std::string reply = request(kAdd, key, std::to_string(delta), nullptr);
  const std::optional<int64_t> sum = parse_int(reply);
  DLSCALE_CHECK(sum.has_value(), "the rendezvous store at {} answered add with '{}'", address(),
                reply.substr(0, 40));
  return *sum;
}

void TcpStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (const auto& key : keys) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    bool timed_out = false;
    request(kGet, key, std::to_string(std::max<int64_t>(0, left.count())), &timed_out);
    if (timed_out) throw_not_set(key, timeout);
  }
}

}  // namespace dlscale::comm
