// How a host process (worker or PS) puts the core's packets on a UDP socket: collected during
// one event and sent in one sendmmsg, either all to one uplink address (the loopback backend,
// where the host's switch is a UDP peer) or each to its ATP destination's IP at kUdpPort
// (networks where hosts address each other by IP and switches on the path aggregate).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "atp/packet_sink.h"
#include "atp/runtime/udp_socket.h"

namespace atp {

class UdpBatchSink final : public PacketSink {
 public:
  // uplink: where every packet goes; nullopt: to {header dst, kUdpPort}.
  UdpBatchSink(UdpSocket& socket, std::optional<UdpEndpoint> uplink) : socket_(socket), uplink_(uplink) {}

  // Copies the packet (the core does not keep the span alive); nothing is sent until flush().
  void send(std::span<const std::uint8_t> packet) override;
  // Sends what was collected. A datagram the kernel refuses is lost, not retried, as on a
  // congested link: the protocol's retransmission recovers it, and the caller's loop must not
  // stall. Returns {sent, refused}.
  std::pair<std::size_t, std::size_t> flush();

 private:
  UdpSocket& socket_;
  std::optional<UdpEndpoint> uplink_;
  std::vector<std::vector<std::uint8_t>> pool_;  // [0, pending_) hold this event's packets
  std::vector<UdpEndpoint> to_;                  // their destinations
  std::size_t pending_ = 0;
  std::vector<UdpOutgoing> outgoing_;  // flush()'s reusable batch, pointing into pool_
};

}  // namespace atp
