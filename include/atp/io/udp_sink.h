// How a host process (worker or PS) puts the core's packets on a UDP socket: collected during
// one event and sent in one sendmmsg, either all to one uplink address (the loopback backend,
// where the host's switch is a UDP peer) or each to its ATP destination's IP at kUdpPort
// (networks where hosts address each other by IP and switches on the path aggregate).
//
// Back-pressure: what the kernel refuses because the socket's send buffer is full (its packets
// still queued in the host's qdisc or NIC), or because that queue itself is full (a socket with
// UdpSocket::report_full_queues), is kept, in order, and sent when there is room, instead of
// being lost on the sender's own host. The core's window bounds how much waits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "atp/io/event_loop.h"
#include "atp/io/udp_socket.h"
#include "atp/packet_sink.h"

namespace atp {

class UdpBatchSink final : public PacketSink {
 public:
  // uplink: where every packet goes; nullopt: to {header dst, kUdpPort}.
  UdpBatchSink(UdpSocket& socket, std::optional<SocketAddress> uplink) : socket_(socket), uplink_(uplink) {}

  // The most packets kept while the socket is full; beyond, the newest are dropped (counted as
  // refused), as a full queue would: a core that keeps sending then is not bounded by a window.
  static constexpr std::size_t kMaxBacklog = 1 << 16;
  // How soon a flush that found the device's queue full tries again: shorter than any queue a
  // qdisc keeps (milliseconds), long enough not to spin.
  static constexpr Duration kQueueFullRetry = std::chrono::microseconds(200);

  // Copies the packet (the core does not keep the span alive); nothing is sent until flush().
  void send(std::span<const std::uint8_t> packet) override;
  // Sends what was collected, oldest first, until the socket's buffer or the device's queue is
  // full; while packets wait, sends again when `loop` sees the socket writable (the socket's fd
  // must be watched by `loop`), or kQueueFullRetry later if the device's queue was full. A
  // datagram refused for another reason (an unreachable address) is dropped. `on_flushed` gets
  // each attempt's {sent, refused}: refused counts the dropped ones only.
  void flush(EventLoop& loop, std::function<void(std::size_t sent, std::size_t refused)> on_flushed = {});
  // Packets kept because the socket's buffer or the device's queue was full.
  std::size_t backlog() const { return pending_; }

 private:
  std::pair<std::size_t, std::size_t> send_pending();  // one attempt: {sent, refused}

  UdpSocket& socket_;
  std::optional<SocketAddress> uplink_;
  std::vector<std::vector<std::uint8_t>> pool_;  // [0, pending_) hold the packets not yet sent
  std::vector<SocketAddress> to_;                // their destinations
  std::size_t pending_ = 0;
  std::size_t dropped_ = 0;            // refused by send() since the last flush (backlog full)
  bool waiting_ = false;               // flush(loop) asked the loop to call back
  std::vector<UdpOutgoing> outgoing_;  // flush()'s reusable batch, pointing into pool_
};

}  // namespace atp
