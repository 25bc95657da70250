// A non-blocking IPv4 UDP socket with batched I/O (recvmmsg/sendmmsg), the port backend of the
// real runtimes. Setup errors throw one clear sentence; data-path failures are only counted.
#pragma once

#include <netinet/in.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "atp/io/socket_address.h"
#include "atp/wire.h"

namespace atp {

// The largest IP packet this host sends towards `to` unfragmented, as its kernel knows it (the
// route's MTU, else its interface's: IP_MTU of a UDP socket connected there), for
// NetworkPlan::mtu_bytes. Throws UdpSetupError, e.g. when no route leads there.
std::uint32_t path_mtu(const SocketAddress& to);
// The address this host's packets towards `to` leave from, as its routes choose it (the local
// address of a UDP socket connected there): a host's own address on the network that leads to
// `to`. Throws UdpSetupError, e.g. when no route leads there.
std::uint32_t source_address_towards(const SocketAddress& to);

// A setup failure (socket, bind, buffer sizes): what() is one sentence, e.g. "cannot bind UDP
// 127.0.0.1:9000: address already in use"; error() is the errno.
class UdpSetupError : public std::runtime_error {
 public:
  UdpSetupError(const std::string& what, int error) : std::runtime_error(what), error_(error) {}
  int error() const { return error_; }

 private:
  int error_;
};

struct UdpSocketOptions {
  // Kernel buffers (bytes): large, so that bursts between two event-loop rounds are not dropped.
  // The kernel caps them at net.core.rmem_max / wmem_max unless the process has CAP_NET_ADMIN
  // (then SO_RCVBUFFORCE / SO_SNDBUFFORCE lift the cap); a cap is not an error.
  int recv_buffer_bytes = 8 << 20;
  int send_buffer_bytes = 8 << 20;
  bool reuse_address = false;  // SO_REUSEADDR
  // SO_REUSEPORT: several sockets of this process bound to one address, each datagram going to
  // one of them (by the kernel's hash, or a filter attached to the group).
  bool reuse_port = false;
  // UDP segmentation offload both ways (Linux 4.18 and 5.0 on): send_batch sends a run of
  // datagrams of one size to one address as one message (UDP_SEGMENT, up to 64 KiB), which the
  // kernel passes through as one buffer and splits only where it must; recv_batch takes such runs
  // whole (UDP_GRO) and hands their datagrams out one by one. On loopback it halves the kernel's
  // work per datagram of a few KiB. Only where every receiver is a socket (or a NIC, which
  // segments): a program reading frames off a virtual link, as the netns testbed's switch does,
  // would see one frame per run. Where the kernel lacks it, the socket falls back to plain sends.
  bool segmentation_offload = false;
};

// The options of a host's data socket (a worker's or a PS's), with an `uplink` (its switch's UDP
// socket) or addressed by IP. By IP, a worker binds 0.0.0.0:kUdpPort (its job's multicast and the
// PS's unicast answers to its resends arrive there) and a PS on the same host binds the host's
// address at the same port: both need SO_REUSEADDR to coexist. With an uplink the peer takes runs
// of datagrams as one message (segmentation_offload); by IP the next hop may read frames off a
// virtual link (the netns testbed's switch), which would see one frame per run.
inline UdpSocketOptions host_socket_options(const std::optional<SocketAddress>& uplink) {
  UdpSocketOptions options;
  options.reuse_address = !uplink;
  options.segmentation_offload = uplink.has_value();
  return options;
}

// One datagram to send: the bytes are only read during send_batch().
struct UdpOutgoing {
  SocketAddress to;
  std::span<const std::uint8_t> bytes;
};

// The most bytes of one UDP datagram over IPv4 (65535 - 20 - 8); also the most of a run of
// datagrams received as one message (UdpSocketOptions::segmentation_offload).
inline constexpr std::size_t kMaxUdpPayload = 65507;

// Reusable receive buffers for recv_batch(): `capacity` messages of up to `max_bytes` each. A
// message is one datagram, or a run of them (segmentation offload), so size() may exceed
// capacity(). The default holds any datagram and any run: nothing is truncated.
class UdpRecvBatch {
 public:
  explicit UdpRecvBatch(std::size_t capacity = 64, std::size_t max_bytes = kMaxUdpPayload);

  std::size_t size() const { return datagrams_.size(); }  // datagrams from the last recv_batch()
  std::size_t capacity() const { return capacity_; }
  // Whether the last recv_batch() read capacity() messages: more may be waiting.
  bool full() const { return messages_ == capacity_; }
  std::span<std::uint8_t> bytes(std::size_t i) {
    return {storage_.data() + datagrams_[i].offset, datagrams_[i].length};
  }
  const SocketAddress& from(std::size_t i) const { return datagrams_[i].from; }

 private:
  friend class UdpSocket;
  struct Datagram {
    std::size_t offset = 0;  // into storage_
    std::size_t length = 0;
    SocketAddress from;
  };
  std::size_t capacity_;
  std::size_t max_bytes_;
  std::size_t messages_ = 0;           // read by the last recv_batch()
  std::vector<std::uint8_t> storage_;  // capacity * max_bytes, one slot per message
  std::vector<std::uint8_t> control_;  // capacity slots of ancillary data (UDP_GRO)
  std::vector<Datagram> datagrams_;
};

struct UdpSocketCounters {
  std::uint64_t received = 0;  // datagrams handed out by recv_batch
  std::uint64_t received_bytes = 0;
  // Messages (a datagram, or a run received whole) larger than the batch's max_bytes: dropped.
  std::uint64_t truncated = 0;
  std::uint64_t recv_errors = 0;  // recvmmsg failures other than "nothing to read"
  std::uint64_t sent = 0;         // datagrams the kernel accepted
  std::uint64_t sent_bytes = 0;
  std::uint64_t send_would_block = 0;  // datagrams not sent because the send buffer was full
  // Datagrams not sent because the host's queue for the device (qdisc, NIC) was full: the kernel
  // says so only after report_full_queues(); before, it drops them in silence.
  std::uint64_t send_queue_full = 0;
  std::uint64_t error_queue = 0;  // ICMP errors read off the error queue (report_full_queues) and ignored
  std::uint64_t send_errors = 0;  // datagrams refused for another reason (skipped)
  // Segmentation offload: messages sent that carried several datagrams, and messages received
  // that did (each of their datagrams also counts in sent or received).
  std::uint64_t sent_runs = 0;
  std::uint64_t received_runs = 0;
};

class UdpSocket {
 public:
  // Binds `local` (port 0: the kernel picks a free one; local_endpoint() tells which).
  // Throws UdpSetupError.
  explicit UdpSocket(const SocketAddress& local, const UdpSocketOptions& options = {});
  ~UdpSocket();
  UdpSocket(UdpSocket&& other) noexcept;
  UdpSocket& operator=(UdpSocket&& other) noexcept;
  UdpSocket(const UdpSocket&) = delete;
  UdpSocket& operator=(const UdpSocket&) = delete;

  int fd() const { return fd_; }  // for EventLoop::add_readable; -1 once moved from
  const SocketAddress& local_endpoint() const { return local_; }
  int recv_buffer_bytes() const;  // what the kernel granted (bytes)
  int send_buffer_bytes() const;

  // Accepts datagrams from `peer` only: the kernel drops whatever anyone else sends to this
  // socket, so another process on the host cannot inject packets (it cannot send from `peer`'s
  // address while `peer` holds it). Sends with an explicit address still go where they say.
  // Throws UdpSetupError naming the peer.
  void connect(const SocketAddress& peer);

  // Sets IP_RECVERR, so that a datagram the host's full qdisc or NIC queue refuses is an error
  // (ENOBUFS, counted in send_queue_full and kept for a retry by send_batch's caller) instead of
  // a silent drop after sendmmsg said "sent": a sender can then wait for its queue as it waits for
  // a full send buffer. ICMP errors, which the option also queues, are read off and counted.
  // Throws UdpSetupError.
  void report_full_queues();

  // Receives datagrams sent to the IPv4 multicast `group` (host order) on the interface that
  // has address `interface_ip`. Throws UdpSetupError naming both.
  void join_multicast(std::uint32_t group, std::uint32_t interface_ip);

  // Reads up to batch.capacity() waiting messages with one recvmmsg; never blocks. Returns how
  // many datagrams were handed out (also batch.size()); 0 when none was waiting.
  std::size_t recv_batch(UdpRecvBatch& batch);
  // Whether send_batch sends runs as one message: segmentation_offload was asked for, the kernel
  // took the socket options, and no run was refused (then the socket sends datagram by datagram).
  bool segments_runs() const { return segment_runs_; }

  // Sends with sendmmsg (in chunks of up to 64 messages); never blocks. Returns how many datagrams the
  // kernel accepted, in order. It stops at the first "would block" (the rest counted in
  // send_would_block, or send_queue_full where the device's queue was full; the caller may retry
  // them); any other error skips that one datagram.
  std::size_t send_batch(std::span<const UdpOutgoing> datagrams);
  // One datagram; true if the kernel accepted it.
  bool send_to(const SocketAddress& to, std::span<const std::uint8_t> bytes);

  const UdpSocketCounters& counters() const { return counters_; }

 private:
  int fd_ = -1;
  SocketAddress local_;
  UdpSocketCounters counters_;
  bool reports_full_queues_ = false;  // IP_RECVERR set: errors to read off the error queue
  bool segment_runs_ = false;         // segmentation_offload, and UDP_SEGMENT works here
  bool receives_runs_ = false;        // UDP_GRO set
};

}  // namespace atp
