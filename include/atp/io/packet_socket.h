// A non-blocking AF_PACKET raw socket on one Linux interface, with batched I/O (recvmmsg/
// sendmmsg): how `atp switch` reads and writes whole Ethernet frames on interface ports.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "atp/io/ethernet.h"
#include "atp/io/udp_socket.h"

namespace atp {

// A setup failure: what() is one sentence naming the interface, e.g. "cannot open interface
// sw0-p1: no such device"; error() is the errno.
class PacketSetupError : public std::runtime_error {
 public:
  PacketSetupError(const std::string& what, int error) : std::runtime_error(what), error_(error) {}
  int error() const { return error_; }

 private:
  int error_;
};

struct PacketSocketOptions {
  // Kernel buffers (bytes). AF_PACKET's defaults (about 200 KB) drop frames under load between
  // two event-loop rounds; SO_*BUFFORCE lifts the sysctl cap (the process has CAP_NET_ADMIN when
  // it may open a packet socket at all, normally).
  int recv_buffer_bytes = 32 << 20;
  int send_buffer_bytes = 32 << 20;
};

// Reusable receive buffers for PacketSocket::recv_batch(): `capacity` frames (1 to 64, what one
// recvmmsg reads) of up to `max_bytes` each (a larger frame is counted as truncated and dropped).
class FrameBatch {
 public:
  explicit FrameBatch(std::size_t capacity = 64, std::size_t max_bytes = 9216 + kEthernetHeaderBytes + 4);

  std::size_t size() const { return count_; }  // frames from the last recv_batch()
  std::size_t capacity() const { return length_.size(); }
  // Whether the last recv_batch() read capacity() frames (own transmissions and truncated ones
  // included, which it does not hand out): more may be waiting.
  bool full() const { return read_ == length_.size(); }
  std::size_t max_bytes() const { return max_bytes_; }
  std::span<std::uint8_t> bytes(std::size_t i) { return {storage_.data() + i * max_bytes_, length_[i]}; }

 private:
  friend class PacketSocket;
  std::size_t max_bytes_;
  std::size_t count_ = 0;
  std::size_t read_ = 0;               // frames the last recv_batch() read
  std::vector<std::uint8_t> storage_;  // capacity * max_bytes, one slot per frame
  std::vector<std::size_t> length_;    // bytes received per slot
};

// The same counters as a UdpSocket's, counting frames: received (handed out), truncated (larger
// than the batch's max_bytes), recv_errors, sent, send_would_block (send buffer full), send_errors
// (e.g. a frame larger than the interface's MTU, or the interface is down).
using PacketSocketCounters = UdpSocketCounters;

class PacketSocket {
 public:
  // Opens a raw socket bound to interface `name` for every EtherType (ETH_P_ALL), that does not
  // see its own transmissions (PACKET_IGNORE_OUTGOING). Throws PacketSetupError naming the
  // interface: no such device, not permitted (needs root or CAP_NET_RAW), ...
  explicit PacketSocket(const std::string& name, const PacketSocketOptions& options = {});
  ~PacketSocket();
  PacketSocket(PacketSocket&& other) noexcept;
  PacketSocket& operator=(PacketSocket&& other) noexcept;
  PacketSocket(const PacketSocket&) = delete;
  PacketSocket& operator=(const PacketSocket&) = delete;

  int fd() const { return fd_; }  // for EventLoop::add_readable; -1 once moved from
  const std::string& name() const { return name_; }
  int ifindex() const { return ifindex_; }
  const MacAddress& mac() const { return mac_; }  // the interface's own MAC address
  int mtu() const { return mtu_; }                // bytes of IP packet per frame, at open
  // The largest frame the interface carries: MTU + Ethernet header + one VLAN tag (bytes).
  std::size_t max_frame_bytes() const { return static_cast<std::size_t>(mtu_) + kEthernetHeaderBytes + 4; }

  // Reads up to batch.capacity() waiting frames with one recvmmsg; never blocks. Returns how
  // many were handed out (also batch.size()); 0 when none was waiting.
  std::size_t recv_batch(FrameBatch& batch);
  // Sends whole frames with sendmmsg (in chunks of up to 64); never blocks. Returns how many the
  // kernel accepted, in order; stops at the first "would block", skips a frame refused otherwise.
  std::size_t send_batch(std::span<const std::span<const std::uint8_t>> frames);
  bool send(std::span<const std::uint8_t> frame);  // one frame; true if the kernel accepted it

  const PacketSocketCounters& counters() const { return counters_; }
  // Frames the kernel dropped before this socket read them (its receive buffer was full), since
  // the socket was opened: PACKET_STATISTICS, which the kernel resets on every read, summed.
  std::uint64_t kernel_drops() const;

 private:
  int fd_ = -1;
  std::string name_;
  int ifindex_ = 0;
  MacAddress mac_{};
  int mtu_ = 0;
  PacketSocketCounters counters_;
  mutable std::uint64_t kernel_drops_ = 0;  // kernel_drops()' running sum
};

}  // namespace atp
