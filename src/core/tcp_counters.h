#pragma once
// What this process really delivered over the network: the kernel's
// per-socket TCP counters (tcpi_bytes_acked, RFC 4898's HCThruOctetsAcked:
// payload bytes the peer acknowledged, so a retransmission counts once)
// summed over every TCP socket the process holds. Backends own their sockets
// (Gloo, Open MPI's TCP transport), so this is the only way to see their
// traffic; shared-memory transports (Open MPI within a node) do not show up.
// (tcpi_bytes_sent, which counts retransmissions again, ran up to 7% over
// on a loaded loopback, where packets get dropped and resent.)
#include <cstdint>
#include <optional>

namespace dlscale {

/// Bytes sent and acknowledged so far over the TCP sockets this process has
/// open now. nullopt if the kernel does not report them (before 4.19).
/// Sockets closed since an earlier call are not counted, so take
/// differences over a span in which no socket closes. An acknowledgement can
/// trail its data by a delayed-ACK interval, so a difference may miss a few
/// segments at the end of its span.
std::optional<int64_t> tcp_bytes_acked();

/// Waits until every byte this process's TCP sockets were given to send has
/// been acknowledged (each send queue, SIOCOUTQ, is empty), at most
/// `max_seconds`; returns whether they drained. A collective can return
/// before its last sends were acknowledged (a peer reads them later), so a
/// span of tcp_bytes_acked() ends after this, not at once (a 3-step span
/// once counted 3% short on a loaded 2-core machine).
bool wait_tcp_sends_acked(double max_seconds);

}  // namespace dlscale
