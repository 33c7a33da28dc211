#include "comm/tcp_store.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace dlscale::comm {
namespace {

enum Op : uint8_t { kSet = 1, kGet = 2, kAdd = 3 };
enum Status : uint8_t { kOk = 0, kTimeout = 1, kBadRequest = 2 };
constexpr uint32_t kMaxField = 64u << 20;  // refuse absurd lengths from a confused peer

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

bool read_field(int fd, std::string* s) {
  uint32_t n = 0;
  if (!read_all(fd, &n, sizeof(n)) || n > kMaxField) return false;
  s->resize(n);
  return read_all(fd, s->data(), n);
}

bool write_message(int fd, uint8_t code, const std::string& key, const std::string& value) {
  return write_all(fd, &code, 1) && write_field(fd, key) && write_field(fd, value);
}

bool read_message(int fd, uint8_t* code, std::string* key, std::string* value) {
  return read_all(fd, code, 1) && read_field(fd, key) && read_field(fd, value);
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

TcpStoreServer::TcpStoreServer(const std::string& host, uint16_t port) {
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
  accept_thread_ = std::thread([this] { accept_loop(); });
}

TcpStoreServer::~TcpStoreServer() {
  stopping_ = true;
  ::shutdown(listen_fd_, SHUT_RDWR);
  if (accept_thread_.joinable()) accept_thread_.join();
  ::close(listen_fd_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int fd : client_fds_) ::shutdown(fd, SHUT_RDWR);
    cv_.notify_all();
  }
  for (auto& t : client_threads_) t.join();
  for (int fd : client_fds_) ::close(fd);
}

void TcpStoreServer::accept_loop() {
  while (!stopping_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) {
      ::close(fd);
      break;
    }
    client_fds_.push_back(fd);
    client_threads_.emplace_back([this, fd] { serve(fd); });
  }
}

void TcpStoreServer::serve(int fd) {
  uint8_t op = 0;
  std::string key, value;
  while (!stopping_ && read_message(fd, &op, &key, &value)) {
    std::string reply;
    uint8_t status = kOk;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (op == kSet) {
        data_[key] = value;
        cv_.notify_all();
      } else if (op == kGet) {
        const auto timeout = std::chrono::milliseconds(std::stoll(value.empty() ? "0" : value));
        const bool found = cv_.wait_for(lock, timeout, [&] {
          return stopping_ || data_.count(key) > 0;
        }) && data_.count(key) > 0;
        if (found) {
          reply = data_[key];
        } else {
          status = kTimeout;
        }
      } else if (op == kAdd) {
        const auto it = data_.find(key);
        const int64_t sum = (it == data_.end() ? 0 : std::stoll(it->second)) + std::stoll(value);
        data_[key] = reply = std::to_string(sum);
        cv_.notify_all();
      } else {
        status = kBadRequest;
      }
    }
    if (!write_message(fd, status, key, reply)) break;
  }
}

TcpStore::TcpStore(const std::string& host, uint16_t port, std::chrono::milliseconds timeout)
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
    DLSCALE_CHECK(std::chrono::steady_clock::now() < deadline,
                  "cannot reach the rendezvous store at {}:{} within {} ms: {}", host, port,
                  timeout.count(), last_error);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

TcpStore::~TcpStore() {
  if (fd_ >= 0) ::close(fd_);
}

std::string TcpStore::request(uint8_t op, const std::string& key, const std::string& value,
                              bool* timed_out) {
  uint8_t status = 0;
  std::string rkey, reply;
  DLSCALE_CHECK(write_message(fd_, op, key, value) && read_message(fd_, &status, &rkey, &reply),
                "lost the connection to the rendezvous store at {} (master gone?)", address());
  DLSCALE_ASSERT(status != kBadRequest);
  if (timed_out != nullptr) *timed_out = status == kTimeout;
  return reply;
}

void TcpStore::set(const std::string& key, const std::string& value) {
  request(kSet, key, value, nullptr);
}

std::string TcpStore::get(const std::string& key) {
  bool timed_out = false;
  std::string v = request(kGet, key, std::to_string(timeout_.count()), &timed_out);
  DLSCALE_CHECK(!timed_out, "rendezvous: key '{}' was not set within {} ms (a worker missing?)",
                key, timeout_.count());
  return v;
}

int64_t TcpStore::add(const std::string& key, int64_t delta) {
  return std::stoll(request(kAdd, key, std::to_string(delta), nullptr));
}

void TcpStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (const auto& key : keys) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    bool timed_out = false;
    request(kGet, key, std::to_string(std::max<int64_t>(0, left.count())), &timed_out);
    DLSCALE_CHECK(!timed_out, "rendezvous: key '{}' was not set within {} ms (a worker missing?)",
                  key, timeout.count());
  }
}

}  // namespace dlscale::comm
