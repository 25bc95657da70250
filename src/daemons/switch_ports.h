// The switch daemon's ports as its dataplane sees them (private to the runtime): one interface,
// two kinds behind it, UDP peers on one UDP socket and Linux interfaces as Ethernet frames.
#pragma once

#include <linux/filter.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "atp/control/stats.h"
#include "atp/daemons/switch_daemon.h"
#include "atp/io/egress_queue.h"
#include "atp/io/ethernet.h"
#include "atp/io/udp_socket.h"
#include "atp/wire.h"

namespace atp::detail {

// Every route the pipeline has: overlay destination -> the port it is routed to.
using Routes = std::unordered_map<Address, PortId>;

using control::EthernetCounters;

// What the ports count themselves, for GET /stats: zero where a kind has no such thing.
struct SwitchPortsCounters {
  std::uint64_t unknown_source = 0;  // datagrams from an address that is no port's peer: dropped (UDP ports)
  std::uint64_t truncated = 0;       // datagrams or frames larger than a receive buffer: dropped
  EthernetCounters ethernet;         // interface ports
  std::size_t mac_addresses = 0;     // interface ports: source MACs learned (where each was seen)
  std::size_t neighbors = 0;         // interface ports: IPv4 -> MAC entries learned
};

// All ports of one switch, of one kind. The dataplane receives bursts from them, asks where each
// received packet goes, queues what the pipeline sends in the form the port carries, and hands
// the released packets back to be sent. Called on the dataplane thread only, except where said.
class SwitchPorts {
 public:
  virtual ~SwitchPorts() = default;

  // ---- receiving ----

  // One packet a port received: a datagram (UDP ports) or a whole Ethernet frame (interface ports).
  struct Received {
    PortId port = 0;
    std::span<std::uint8_t> bytes;
  };
  // What one receive_burst() read.
  struct Burst {
    std::size_t read = 0;               // messages the kernel handed out; 0: none was waiting
    bool full = false;                  // as many as one read takes: more may be waiting
    std::span<const Received> packets;  // those from a port, valid until the next receive_burst()
  };
  // The file descriptors the dataplane waits on (EventLoop::add_readable); a readable fds()[i]
  // is read with receive_burst(i).
  virtual std::vector<int> fds() const = 0;
  // One batched read (recvmmsg) of what waits on fds()[source]; never blocks.
  virtual Burst receive_burst(std::size_t source) = 0;
  // Called for each received packet as it arrives, before the port's ingress queue: where
  // interface ports learn the source MAC, as a hardware switch's ingress does.
  virtual void on_arrival(PortId port, std::span<const std::uint8_t> bytes) = 0;

  // Where a received packet goes once past its port's ingress queue.
  struct Destination {
    enum class Kind : std::uint8_t {
      kPipeline,       // `atp` (the datagram, or the ATP packet inside the frame) to SwitchPipeline
      kPort,           // the whole frame out of `port` (Ethernet switching)
      kAllOtherPorts,  // the whole frame out of every port but the one it came in on (flooding)
      kNowhere,        // dropped; the ports counted why
    };
    Kind kind = Kind::kNowhere;
    std::span<std::uint8_t> atp{};  // kPipeline: the bytes for SwitchPipeline::process
    PortId port = 0;                // kPort: the egress port
  };
  virtual Destination destination(PortId from, std::span<std::uint8_t> received) = 0;

  // ---- sending ----

  // What the port queues hold (ATP packets or Ethernet frames): how they count wire bytes and
  // mark ECN.
  virtual Framing framing() const = 0;
  // Whether `port` has somewhere to send to: a UDP port has, unless DELETE /hosts detached its
  // peer; an interface port always has (its cable is not detached at run time).
  virtual bool attached(PortId port) const = 0;
  // What to queue on `port` for `packet`, an ATP packet the pipeline sends: the packet itself
  // (UDP ports), or an Ethernet frame around it (interface ports; valid until the next call).
  // nullopt (counted) when it cannot be sent.
  virtual std::optional<std::span<const std::uint8_t>> encapsulate(PortId port,
                                                                   std::span<const std::uint8_t> packet) = 0;
  // One packet the queues released, and the port it goes out of.
  struct Outgoing {
    PortId port = 0;
    std::span<const std::uint8_t> bytes;
  };
  // Sends `packets` (in port order, each port's in the order released) in batches (sendmmsg);
  // never blocks. Returns how many the kernel refused (a full buffer): dropped, as a switch's full
  // port would drop them.
  virtual std::uint64_t send(std::span<const Outgoing> packets) = 0;

  // ---- stats ----

  virtual SwitchPortsCounters counters() const = 0;
  // Says in `stats` (GET /stats, its port rows made) what the ports are: UDP ports the data
  // socket's address and each port's peer (none once detached), interface ports their names.
  virtual void describe(control::SwitchStats& stats) const = 0;
  // Frames the kernel dropped on `port` before the switch read them (interface ports; 0 on UDP).
  virtual std::uint64_t kernel_drops(PortId port) const = 0;

  // ---- hosts attached at run time (POST and DELETE /hosts) ----

  // Whether hosts attach at run time: UDP ports. A constant, safe to ask from any thread, like
  // data_endpoint(). Without it, port_of, attach and detach are not called.
  virtual bool supports_hosts() const = 0;
  // Where hosts and peer switches send (the UDP socket's address); {0, 0} on interface ports.
  virtual SocketAddress data_endpoint() const = 0;
  // The port whose peer `peer` is, if any.
  virtual std::optional<PortId> port_of(const SocketAddress& peer) const = 0;
  // `peer` becomes port `port`'s peer (a port with none: new, or detached).
  virtual void attach(PortId port, const SocketAddress& peer) = 0;
  // Port `port` (attached) loses its peer: its datagrams then count as unknown_source.
  virtual void detach(PortId port) = 0;
};

// The end of the classic BPF programs that steer packets to dataplane threads (a UDP port's
// SO_REUSEPORT group, an interface's fan-out group): with A the packet's aggregator index,
// returns slice_of(A, aggregators, threads) (switch.h), the thread that holds that aggregator.
inline void append_slice_of(std::vector<sock_filter>& code, std::uint32_t aggregators, std::uint32_t threads) {
  code.push_back(BPF_STMT(BPF_ALU | BPF_MOD | BPF_K, aggregators));
  code.push_back(BPF_STMT(BPF_ALU | BPF_MOD | BPF_K, threads));
  code.push_back(BPF_STMT(BPF_RET | BPF_A, 0));
}

// UDP ports (switch_udp_ports.cc), one set per dataplane thread: `threads` sockets bound to
// config.listen (throws UdpSetupError). More than one share that address (SO_REUSEPORT) and a
// socket filter hands each datagram to the socket of thread slice_of(its aggregator index), a
// run of datagrams received as one (UDP_GRO) by its first. Each set has every port and peer.
std::vector<std::unique_ptr<SwitchPorts>> open_udp_ports(const SwitchDaemonConfig& config, std::uint32_t threads);
// IPv4 -> MAC bindings that the interface ports of every dataplane thread learn from the frames
// they receive, and need for the frames they send: a thread sends to hosts whose frames another
// thread received (ARP goes to thread 0). Each thread keeps its own copy; what one learns that is
// new goes in here, a miss is looked up here, and a change makes every copy start over.
class SharedNeighbors {
 public:
  // Learns that `ip` is at `mac` (NeighborTable's rules); a change bumps generation().
  void learn(Address ip, const MacAddress& mac);
  std::optional<MacAddress> lookup(Address ip) const;
  std::uint64_t generation() const { return generation_.load(std::memory_order_acquire); }
  std::size_t size() const;

 private:
  mutable std::mutex mutex_;
  NeighborTable table_;  // under mutex_
  std::atomic<std::uint64_t> generation_{0};
};

// What the interface ports of every dataplane thread share.
struct SharedInterfaces {
  SharedNeighbors neighbors;
  std::vector<std::uint16_t> fanout_groups;  // by port: the id of the interface's fan-out group
};

// Interface ports (switch_ethernet_ports.cc), dataplane thread `thread`'s (of `threads`): opens
// every port's packet socket in the calling thread's network namespace (throws PacketSetupError
// naming the interface). With several threads each interface's sockets form a fan-out group
// (PACKET_FANOUT), thread k's socket member k, whose filter hands an ATP frame to the thread
// slice_of(its aggregator index) and every other frame to thread 0, which does all Ethernet
// switching; call it for thread 0 first, then 1, ... `routes` (kept by reference, so it must
// outlive the ports) refuses IP -> MAC bindings that a port claims for an address routed to
// another port; `shared` (also kept) is every thread's.
std::unique_ptr<SwitchPorts> open_ethernet_ports(const SwitchDaemonConfig& config, const Routes& routes,
                                                 std::uint32_t thread, std::uint32_t threads, SharedInterfaces& shared);

}  // namespace atp::detail
