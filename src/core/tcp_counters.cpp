#include "core/tcp_counters.h"

#include <dirent.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace dlscale {

std::optional<int64_t> tcp_bytes_acked() {
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return std::nullopt;
  int64_t total = 0;
  bool supported = true;
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
    tcp_info info;
    std::memset(&info, 0, sizeof(info));
    len = sizeof(info);
    if (::getsockopt(static_cast<int>(fd), IPPROTO_TCP, TCP_INFO, &info, &len) != 0) continue;
    // Kernels older than 4.19 return a shorter struct without the counter.
    if (len < offsetof(tcp_info, tcpi_bytes_acked) + sizeof(info.tcpi_bytes_acked)) {
      supported = false;
      continue;
    }
    total += static_cast<int64_t>(info.tcpi_bytes_acked);
  }
  ::closedir(dir);
  if (!supported) return std::nullopt;
  return total;
}

}  // namespace dlscale
