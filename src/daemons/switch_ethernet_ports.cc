// The switch's interface ports: Linux interfaces read and written as whole Ethernet frames
// (packet sockets); ATP frames go to the pipeline, the rest is switched by learned MAC addresses.
#include <linux/filter.h>
#include <linux/if_packet.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <vector>

#include "atp/io/ethernet.h"
#include "atp/io/packet_socket.h"
#include "atp/io/socket_batch.h"
#include "switch_ports.h"

namespace atp::detail {

void SharedNeighbors::learn(Address ip, const MacAddress& mac) {
  std::lock_guard lock(mutex_);
  const std::optional<MacAddress> before = table_.lookup(ip);
  table_.learn(ip, mac);
  if (table_.lookup(ip) != before) generation_.fetch_add(1, std::memory_order_acq_rel);
}

std::optional<MacAddress> SharedNeighbors::lookup(Address ip) const {
  std::lock_guard lock(mutex_);
  return table_.lookup(ip);
}

std::size_t SharedNeighbors::size() const {
  std::lock_guard lock(mutex_);
  return table_.size();
}

namespace {

// The fan-out filter of an interface's sockets (one per dataplane thread, PACKET_FANOUT_CBPF):
// for an IPv4 UDP datagram to kUdpPort (the first fragment, if fragmented) A = its ATP header's
// aggregator index, then slice_of(A); for any other frame 0. The kernel runs it with the frame's
// network header at SKF_NET_OFF and takes the result modulo the group's size.
std::vector<sock_filter> fanout_program(std::uint32_t aggregators, std::uint32_t threads) {
  constexpr auto kNet = static_cast<std::uint32_t>(SKF_NET_OFF);
  constexpr auto kIndex = static_cast<std::uint32_t>(8 + kAggregatorIndexOffset);  // after the UDP header
  // A jump skips jt or jf instructions; 16, the last, answers 0.
  std::vector<sock_filter> code = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, static_cast<std::uint32_t>(SKF_AD_OFF + SKF_AD_PROTOCOL)),  // 0
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0x0800, 0, 14),                                            // 1: IPv4, else 16
      BPF_STMT(BPF_LD | BPF_B | BPF_ABS, kNet + 9),                                                  // 2: its protocol
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 17, 0, 12),                                                // 3: UDP, else 16
      BPF_STMT(BPF_LD | BPF_H | BPF_ABS, kNet + 6),         // 4: flags and fragment offset
      BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, 0x1FFF, 10, 0),  // 5: a later fragment: 16
      BPF_STMT(BPF_LD | BPF_B | BPF_ABS, kNet + 0),         // 6: version and IHL
      BPF_STMT(BPF_ALU | BPF_AND | BPF_K, 0x0F),            // 7
      BPF_STMT(BPF_ALU | BPF_LSH | BPF_K, 2),               // 8: the IP header's bytes
      BPF_STMT(BPF_MISC | BPF_TAX, 0),                      // 9: X = them
      BPF_STMT(BPF_LD | BPF_H | BPF_IND, kNet + 2),         // 10: the UDP destination port
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kUdpPort, 0, 4),  // 11: ATP's, else 16
      BPF_STMT(BPF_LD | BPF_W | BPF_IND, kNet + kIndex),    // 12: the aggregator index
  };
  append_slice_of(code, aggregators, threads);   // 13-15
  code.push_back(BPF_STMT(BPF_RET | BPF_K, 0));  // 16
  return code;
}

class EthernetPorts final : public SwitchPorts {
 public:
  EthernetPorts(const SwitchDaemonConfig& config, const Routes& routes, std::uint32_t thread, std::uint32_t threads,
                SharedInterfaces& shared)
      : sockets_(open_sockets(config)),
        batch_(64, largest_frame(sockets_)),
        routes_(routes),
        shared_(shared.neighbors) {
    if (threads > 1) join_fanout(config, thread, threads, shared.fanout_groups);
  }

  std::vector<int> fds() const override {
    std::vector<int> fds;
    for (const PacketSocket& s : sockets_) fds.push_back(s.fd());
    return fds;
  }

  // Frames waiting on port `source`'s interface.
  Burst receive_burst(std::size_t source) override {
    const std::size_t n = sockets_[source].recv_batch(batch_);
    received_.clear();
    for (std::size_t i = 0; i < n; ++i) received_.push_back({static_cast<PortId>(source), batch_.bytes(i)});
    return {n, batch_.full(), received_};
  }

  // Where a source MAC is, is learned on arrival, like a hardware switch's ingress does.
  void on_arrival(PortId port, std::span<const std::uint8_t> frame) override {
    if (frame.size() >= kEthernetHeaderBytes) {
      MacAddress src;
      std::copy_n(frame.begin() + 6, src.size(), src.begin());
      macs_.learn(src, port);
    }
  }

  // ATP frames to the pipeline, the rest switched as Ethernet.
  Destination destination(PortId from, std::span<std::uint8_t> frame) override {
    const std::optional<ParsedFrame> parsed = parse_frame(frame);
    if (!parsed) {  // a runt without even an Ethernet header
      ++ethernet_.malformed_frames;
      return {};
    }
    const FrameClass kind = classify(*parsed, frame);
    switch (kind.kind) {
      case FrameKind::kAtp:
        ++ethernet_.atp_frames;
        learn_neighbor(parsed->ipv4->src, parsed->src, from);
        return {Destination::Kind::kPipeline, frame.subspan(kind.atp_offset, kind.atp_bytes)};
      case FrameKind::kMalformedAtp:
        ++ethernet_.malformed_frames;
        return {};
      case FrameKind::kOther:
        break;
    }
    ++ethernet_.non_atp_frames;
    if (parsed->arp) learn_neighbor(parsed->arp->sender_ip, parsed->arp->sender_mac, from);
    if (!is_group_mac(parsed->dst)) {
      if (const std::optional<PortId> to = macs_.lookup(parsed->dst)) {
        if (*to == from) {
          ++ethernet_.l2_same_port;  // both ends are behind this port: not the switch's to deliver
          return {};
        }
        ++ethernet_.l2_forwarded;
        return {Destination::Kind::kPort, {}, *to};
      }
    }
    ++ethernet_.l2_flooded;
    return {Destination::Kind::kAllOtherPorts};
  }

  Framing framing() const override { return Framing::kEthernet; }

  bool attached(PortId) const override { return true; }

  // The ATP packet the pipeline sends on `port` in an Ethernet frame: IP from the ATP header,
  // destination MAC the group's multicast MAC or the learned one of the header's dst, source MAC
  // the learned one of its src (the port's own when unknown). nullopt (counted) when dst's MAC is
  // unknown: the switch does not ARP itself; the hosts' own ARP teaches it their MACs.
  std::optional<std::span<const std::uint8_t>> encapsulate(PortId port, std::span<const std::uint8_t> packet) override {
    Header h;
    if (decode_header(packet, h) != DecodeError::kOk) {  // the pipeline only sends valid packets
      ++ethernet_.malformed_frames;
      return std::nullopt;
    }
    MacAddress dst;
    if (is_multicast(h.dst)) {
      dst = multicast_mac(h.dst);
    } else if (const std::optional<MacAddress> m = neighbor(h.dst)) {
      dst = *m;
    } else {
      ++ethernet_.no_neighbor;
      return std::nullopt;
    }
    const MacAddress src = neighbor(h.src).value_or(sockets_[port].mac());
    build_atp_frame(dst, src, packet, encapsulated_);
    return encapsulated_;
  }

  // One sendmmsg batch per port.
  std::uint64_t send(std::span<const Outgoing> packets) override {
    std::uint64_t refused = 0;
    for (std::size_t i = 0; i < packets.size();) {
      const PortId port = packets[i].port;
      tx_frames_.clear();
      for (; i < packets.size() && packets[i].port == port; ++i) tx_frames_.push_back(packets[i].bytes);
      refused += tx_frames_.size() - sockets_[port].send_batch(tx_frames_);
    }
    return refused;
  }

  SwitchPortsCounters counters() const override {
    SwitchPortsCounters c;
    for (const PacketSocket& s : sockets_) c.truncated += s.counters().truncated;
    c.ethernet = ethernet_;
    c.mac_addresses = macs_.size();
    c.neighbors = shared_.size();
    return c;
  }

  void describe(control::SwitchStats& stats) const override {
    for (const PacketSocket& s : sockets_) stats.interfaces.push_back(s.name());
    for (control::SwitchPortStats& row : stats.ports) row.interface = sockets_[row.port].name();
  }

  std::uint64_t kernel_drops(PortId port) const override { return sockets_[port].kernel_drops(); }

  // Hosts are attached by cable here: SwitchControl asks supports_hosts() first.
  bool supports_hosts() const override { return false; }
  SocketAddress data_endpoint() const override { return {}; }
  std::optional<PortId> port_of(const SocketAddress&) const override { return std::nullopt; }
  void attach(PortId, const SocketAddress&) override { throw std::logic_error("interface ports have no hosts"); }
  void detach(PortId) override { throw std::logic_error("interface ports have no hosts"); }

 private:
  static std::vector<PacketSocket> open_sockets(const SwitchDaemonConfig& config) {
    std::vector<PacketSocket> sockets;
    for (const SwitchPortConfig& port : config.ports) sockets.emplace_back(port.interface);
    return sockets;
  }

  // Frames up to the largest MTU among the ports; a larger one (e.g. a GRO super-frame from an
  // interface with offloads on) is counted as truncated.
  static std::size_t largest_frame(const std::vector<PacketSocket>& sockets) {
    std::size_t max_frame = 0;
    for (const PacketSocket& s : sockets) max_frame = std::max(max_frame, s.max_frame_bytes());
    return max_frame;
  }

  // Learns that `ip` is at `mac`, unless the routes say `ip` lives behind another port than the
  // one it came from: a host cannot redirect the switch's frames to another host's IP by
  // claiming it (in ARP or as an ATP source) from its own port. What this thread did not know
  // yet goes to the other threads too.
  void learn_neighbor(Address ip, const MacAddress& mac, PortId port) {
    if (auto it = routes_.find(ip); it != routes_.end() && it->second != port) {
      ++ethernet_.neighbor_refused;
      return;
    }
    if (neighbor(ip) == mac) return;  // every frame of a host teaches the same: the common case
    neighbors_.learn(ip, mac);
    shared_.learn(ip, mac);
  }

  // Where `ip` is: this thread's copy, which starts over whenever a thread learned a change, and
  // fills its misses from what the threads learned together.
  std::optional<MacAddress> neighbor(Address ip) {
    if (const std::uint64_t g = shared_.generation(); g != generation_) {
      neighbors_ = NeighborTable();
      generation_ = g;
    }
    if (std::optional<MacAddress> m = neighbors_.lookup(ip)) return m;
    const std::optional<MacAddress> m = shared_.lookup(ip);
    if (m) neighbors_.learn(ip, *m);
    return m;
  }

  // Makes each interface's socket member `thread` of the interface's fan-out group. Thread 0's
  // socket founds it, with an id the kernel makes unique in the namespace
  // (PACKET_FANOUT_FLAG_UNIQUEID; kept in groups[i] for port i), and gives it its filter; the
  // later threads join it. Frames that reached a later thread's socket before it joined, thread 0
  // had too: dropped.
  void join_fanout(const SwitchDaemonConfig& config, std::uint32_t thread, std::uint32_t threads,
                   std::vector<std::uint16_t>& groups) {
    const std::uint32_t aggregators = config.pipeline.atp_capable ? config.pipeline.num_aggregators : 1;
    const std::vector<sock_filter> code = fanout_program(aggregators, threads);
    const sock_fprog program{static_cast<unsigned short>(code.size()), const_cast<sock_filter*>(code.data())};
    groups.resize(sockets_.size());
    for (std::size_t i = 0; i < sockets_.size(); ++i) {
      const int fd = sockets_[i].fd();
      bool joined = false;
      if (thread == 0) {
        const int found = (PACKET_FANOUT_CBPF | PACKET_FANOUT_FLAG_UNIQUEID) << 16;  // id 0: the kernel's choice
        int got = 0;
        socklen_t len = sizeof got;
        joined = ::setsockopt(fd, SOL_PACKET, PACKET_FANOUT, &found, sizeof found) == 0 &&
                 ::getsockopt(fd, SOL_PACKET, PACKET_FANOUT, &got, &len) == 0 &&
                 ::setsockopt(fd, SOL_PACKET, PACKET_FANOUT_DATA, &program, sizeof program) == 0;
        groups[i] = static_cast<std::uint16_t>(got & 0xFFFF);
      } else {
        const int join = groups[i] | (PACKET_FANOUT_CBPF << 16);
        joined = ::setsockopt(fd, SOL_PACKET, PACKET_FANOUT, &join, sizeof join) == 0;
      }
      if (!joined) {
        const int error = errno;
        throw PacketSetupError("cannot spread interface " + sockets_[i].name() + " over " + std::to_string(threads) +
                                   " dataplane threads (PACKET_FANOUT): " + errno_reason(error),
                               error);
      }
      while (thread != 0 && sockets_[i].recv_batch(batch_) > 0) {
      }
    }
  }

  std::vector<PacketSocket> sockets_;       // port i's raw socket
  FrameBatch batch_;                        // receive buffers, sized for the largest MTU
  const Routes& routes_;                    // the dataplane's: learn_neighbor's check
  std::vector<Received> received_;          // receive_burst()'s frames, reused
  MacTable macs_;                           // where each source MAC was seen
  NeighborTable neighbors_;                 // IPv4 -> MAC, for the frames the pipeline sends: this thread's copy
  SharedNeighbors& shared_;                 // what every thread learned
  std::uint64_t generation_ = 0;            // shared_'s, when neighbors_ was last emptied
  std::vector<std::uint8_t> encapsulated_;  // encapsulate()'s output, reused
  std::vector<std::span<const std::uint8_t>> tx_frames_;  // send()'s batch for one port, reused
  EthernetCounters ethernet_;
};

}  // namespace

std::unique_ptr<SwitchPorts> open_ethernet_ports(const SwitchDaemonConfig& config, const Routes& routes,
                                                 std::uint32_t thread, std::uint32_t threads,
                                                 SharedInterfaces& shared) {
  return std::make_unique<EthernetPorts>(config, routes, thread, threads, shared);
}

}  // namespace atp::detail
