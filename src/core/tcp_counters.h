#pragma once
// What this process really put on the network: the kernel's per-socket TCP
// counters (tcpi_bytes_sent, RFC 4898's DataOctetsOut) summed over every TCP
// socket the process holds. Backends own their sockets (Gloo, Open MPI's TCP
// transport), so this is the only way to see their traffic; shared-memory
// transports (Open MPI within a node) do not show up here.
#include <cstdint>
#include <optional>

namespace dlscale {

/// Bytes sent so far over the TCP sockets this process has open now
/// (retransmissions included; loopback has none). nullopt if the kernel does
/// not report them. Sockets closed since an earlier call are not counted, so
/// take differences over a span in which no socket closes.
std::optional<int64_t> tcp_bytes_sent();

}  // namespace dlscale
