#include "core/tcp_counters.h"

#include <dirent.h>
#include <linux/sockios.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

namespace dlscale {

namespace {

/// Calls `fn(fd)` for each TCP socket (IPv4 or IPv6) this process holds.
template <typename Fn>
bool for_each_tcp_socket(Fn&& fn) {
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return false;
  while (const dirent* e = ::readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == ::dirfd(dir)) continue;
    int type = 0, domain = 0;
    socklen_t len = sizeof(type);
    if (::getsockopt(static_cast<int>(fd), SOL_SOCKET, SO_TYPE, &type, &len) != 0) continue;
    len = sizeof(domain);
    if (type != SOCK_STREAM ||
        ::getsockopt(static_cast<int>(fd), SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0 ||
        (domain != AF_INET && domain != AF_INET6)) {
      continue;
    }
    fn(static_cast<int>(fd));
  }
  ::closedir(dir);
  return true;
}

}  // namespace

std::optional<int64_t> tcp_bytes_acked() {
  int64_t total = 0;
  bool supported = true;
  const bool listed = for_each_tcp_socket([&](int fd) {
    tcp_info info;
    std::memset(&info, 0, sizeof(info));
    socklen_t len = sizeof(info);
    if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return;
    // Kernels older than 4.19 return a shorter struct without the counter.
    if (len < offsetof(tcp_info, tcpi_bytes_acked) + sizeof(info.tcpi_bytes_acked)) {
      supported = false;
      return;
    }
    total += static_cast<int64_t>(info.tcpi_bytes_acked);
  });
  if (!listed || !supported) return std::nullopt;
  return total;
}

bool wait_tcp_sends_acked(double max_seconds) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(max_seconds);
  for (;;) {
    int64_t queued = 0;
    for_each_tcp_socket([&](int fd) {
      int n = 0;
      if (::ioctl(fd, SIOCOUTQ, &n) == 0) queued += n;
    });
    if (queued == 0) return true;
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace dlscale
