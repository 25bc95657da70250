// The ns-3 adapter's state (ns3_network.h), shared by its files: ns3_network.cc (nodes, packets,
// timers) and ns3_links.cc (links and the devices' traces). Private to src/sim/ns3/.
#pragma once

#include <algorithm>
#include <map>
#include <random>
#include <stdexcept>
#include <vector>

// Single headers, not ns-3's *-module.h: those pull in singleton.h, which GCC 12 rejects in
// C++20 mode (constructors named with a template-id).
#include <ns3/config.h>
#include <ns3/data-rate.h>
#include <ns3/drop-tail-queue.h>
#include <ns3/error-model.h>
#include <ns3/inet-socket-address.h>
#include <ns3/internet-stack-helper.h>
#include <ns3/ipv4-header.h>
#include <ns3/ipv4-static-routing-helper.h>
#include <ns3/ipv4.h>
#include <ns3/nstime.h>
#include <ns3/packet.h>
#include <ns3/point-to-point-channel.h>
#include <ns3/point-to-point-helper.h>
#include <ns3/point-to-point-net-device.h>
#include <ns3/rng-seed-manager.h>
#include <ns3/simulator.h>
#include <ns3/socket.h>
#include <ns3/string.h>
#include <ns3/traffic-control-layer.h>
#include <ns3/udp-header.h>
#include <ns3/udp-socket-factory.h>
#include <ns3/uinteger.h>

#include "atp/io/egress_queue.h"
#include "atp/io/ethernet.h"
#include "atp/io/fair_queue.h"
#include "atp/sim/ns3_network.h"

namespace atp::ns3adapter {

using sim::NodeId;

inline constexpr std::uint16_t kIpv4Protocol = 0x0800;
inline constexpr std::uint8_t kUdpProtocol = 17;
inline constexpr std::int32_t kNoChannel = -1;
// A point-to-point device's header. Each packet is followed by a gap as long as the 12 bytes an
// Ethernet header has more, so that a link carries packets at the pace of the testbed's and the
// in-process network's Ethernet frames (kEncapsulationBytes) and a queue fills and drains alike.
inline constexpr std::size_t kPppBytes = 2;
// Settings that mean "no limit" in EgressConfig (0) need a number on a device.
inline constexpr double kUnlimitedRateGbps = 10000;          // 10 Tbit/s: a 300-byte packet takes 0.24 ns
inline constexpr std::uint32_t kUnlimitedBuffer = 1u << 20;  // packets
// Where a host sends bytes that are not an ATP packet (a noise source's garbage): an address no
// host has, in 10.0.0.0/8 so that it leaves on the host's link to the switch, which drops it.
inline constexpr Address kUnparsableDestination = 0x0AFFFFFEu;  // 10.255.255.254

// Connects a trace source, which ns-3 would otherwise skip silently when the name is wrong
// (trace names change between ns-3 versions).
template <class Object, class Callback>
void connect_trace(const Object& object, const char* name, Callback callback) {
  if (!object->TraceConnectWithoutContext(name, callback)) {
    throw std::logic_error(std::string("ns-3 has no trace source '") + name + "' here (ns-3 version?)");
  }
}

struct Ns3Network::Impl {
  using NodeSink = sim::NodeSink<Impl>;

  struct NodeState {
    std::string name;
    bool is_host = false;
    Address address = 0;               // hosts
    std::map<Address, PortId> routes;  // switches: where non-ATP IPv4 goes
    std::unique_ptr<sim::Node> node;
    std::unique_ptr<NodeSink> sink;
    ns3::Ptr<ns3::Node> ns3;
    ns3::Ptr<ns3::Socket> socket;               // hosts: UDP on kUdpPort
    std::vector<std::int32_t> channel_by_port;  // egress channel per port
    Time armed_timer = kNever;
    std::uint64_t timer_generation = 0;
    bool egress_full_pending = false;  // an on_egress_full call for it is scheduled
  };
  struct Waiting {
    ns3::Ptr<ns3::Packet> packet;
    ns3::InetSocketAddress to;
  };
  struct Channel {
    NodeId from = 0, to = 0;
    ns3::Ptr<ns3::PointToPointNetDevice> tx, rx;
    ns3::Ptr<ns3::PointToPointChannel> link;
    ns3::Ptr<ns3::RateErrorModel> loss;  // on rx
    sim::ChannelConfig config;
    sim::ChannelCounters counters;
    bool transmitting = false;
    std::uint32_t transmitting_bytes = 0;  // of the packet being sent, with its PPP header
    ns3::Time transmit_end;                // when the device is done with it (its time and the gap)
    ns3::DataRate rate;
    ns3::Time gap;  // after every packet: see kPppBytes
    ns3::Time tx_time(std::uint32_t bytes) const { return rate.CalculateBytesTxTime(bytes) + gap; }
    std::mt19937_64 rng;  // duplication and reordering draws, one stream per channel
    // config.fair_queueing (a host's): the packets waiting for the device, by job; the device
    // takes the next in turn whenever it is idle.
    FairQueue<Waiting> waiting;
    UnmarkableDrops unmarkable;  // which not-ECT packets past the ECN threshold are dropped
    bool next_in_turn_pending = false;
  };

  Impl(std::uint64_t s, std::uint32_t mtu) : seed(s), mtu_bytes(mtu) {}

  // Whether the device is sending or has packets queued; and the packets in the channel's egress
  // queue, counting the one being sent and those waiting for their turn (EgressQueue's depth).
  // A packet whose last bit leaves now is sent, as in EgressQueue, whichever of the events at
  // this time ns-3 runs first.
  static bool sending(const Channel& c) { return c.transmitting && c.transmit_end > ns3::Simulator::Now(); }
  static bool device_busy(const Channel& c) { return c.transmitting || c.tx->GetQueue()->GetNPackets() > 0; }
  static std::size_t depth(const Channel& c) {
    return c.tx->GetQueue()->GetNPackets() + (sending(c) ? 1 : 0) + c.waiting.size();
  }
  // The bytes in the channel's egress queue as its buffer_bytes counts them, as Ethernet frames
  // (EgressQueue::wire_bytes): the device's IPv4 packets with their PPP header and the 12 bytes
  // more an Ethernet header has, and those waiting for their turn (counted so when they came).
  static std::uint64_t depth_bytes(const Channel& c) {
    const std::uint64_t device = c.tx->GetQueue()->GetNPackets() + (sending(c) ? 1 : 0);
    return c.tx->GetQueue()->GetNBytes() + (sending(c) ? c.transmitting_bytes : 0) +
           device * (kEthernetHeaderBytes - kPppBytes) + c.waiting.bytes();
  }
  // EgressQueue's buffer and ECN rule for an IPv4 packet of `ip_bytes` that the channel's node
  // sends now; `unmarkable`: it cannot carry an ECN mark. The adapter admits what it sends
  // (every packet a switch sends, a host's ATP packets); a host's TCP segments meet the device's
  // own queue, which counts buffer_packets (apply). A refusal is the caller's to count.
  static EgressQueue::Admission admit(Channel& c, std::size_t ip_bytes, bool unmarkable) {
    return EgressQueue::admission(c.config, depth(c), depth_bytes(c), ip_bytes + kEthernetHeaderBytes, unmarkable,
                                  c.unmarkable);
  }

  // Sends onto the channel's device (a switch's egress).
  static auto device_sender(const Channel& c) {
    return [tx = c.tx](ns3::Ptr<ns3::Packet> q) { tx->Send(q, tx->GetBroadcast(), kIpv4Protocol); };
  }

  // Sends from host `n`'s UDP socket to `to`.
  static auto host_sender(const NodeState& n, ns3::InetSocketAddress to) {
    return [socket = n.socket, to](ns3::Ptr<ns3::Packet> q) { socket->SendTo(q, 0, to); };
  }

  void apply(Channel& c, const sim::ChannelConfig& config, bool initial) {
    c.config = config;
    if (config.rate_gbps <= 0) {
      // Unlimited, as EgressQueue's: no queue builds up, so no buffer or ECN threshold applies
      // (the device's 10 Tbit/s still queues a fan-in's coinciding packets for picoseconds).
      c.config.buffer_packets = 0;
      c.config.buffer_bytes = 0;
      c.config.ecn_threshold_packets = 0;
    }
    const double gbps = config.rate_gbps > 0 ? config.rate_gbps : kUnlimitedRateGbps;
    c.rate = ns3::DataRate(static_cast<std::uint64_t>(gbps * 1e9));
    c.gap = ns3::PicoSeconds(std::llround(8.0 * (kEthernetHeaderBytes - kPppBytes) * 1000 / gbps));
    c.tx->SetDataRate(c.rate);
    c.tx->SetInterframeGap(c.gap);
    // The device queue holds what waits behind the packet being sent: one less than the buffer.
    // A switch's needs no limit: refuses() decides for all it sends.
    const std::uint32_t buffer =
        c.config.buffer_packets > 0 && nodes[c.from].is_host ? c.config.buffer_packets : kUnlimitedBuffer;
    c.tx->GetQueue()->SetMaxSize(ns3::QueueSize(ns3::QueueSizeUnit::PACKETS, std::max<std::uint32_t>(buffer - 1, 1)));
    if (initial) c.link->SetAttribute("Delay", ns3::TimeValue(to_ns3(config.delay)));
    c.loss->SetRate(config.loss);
    c.loss->Enable();
  }

  // Sends what node `from` put on `port`: hosts through their UDP socket, switches onto the device
  // in a new IPv4/UDP header.
  void transmit(NodeId from, PortId port, std::span<const std::uint8_t> bytes) {
    NodeState& n = nodes[from];
    if (port >= n.channel_by_port.size() || n.channel_by_port[port] == kNoChannel) return;
    Channel& c = channels[static_cast<std::size_t>(n.channel_by_port[port])];
    Header h;
    const bool atp = decode_header(bytes, h) == DecodeError::kOk;
    if (!atp) {
      // Only noise sources send what does not parse; it goes to the switch like any packet.
      h.src = n.address;
      h.dst = kUnparsableDestination;
    }
    const auto cid = static_cast<std::size_t>(n.channel_by_port[port]);
    const EgressQueue::Admission admission = admit(c, bytes.size() + kIpUdpBytes, /*unmarkable=*/!atp);
    const std::uint64_t flow = atp ? h.job : kNonAtpFlow;  // job_flow(bytes), decoded once
    const bool waits = n.is_host && c.config.fair_queueing && (!c.waiting.empty() || device_busy(c));
    if (EgressQueue::refuses(admission)) {
      egress_refused(cid);
      // A full buffer drops from the job that fills it: this packet takes the dropped one's place.
      if (!waits || admission == EgressQueue::Admission::kUnmarkable || !c.waiting.drop_for(flow)) return;
    }
    // A marked packet is a marked copy: the node's bytes (one copy of a multicast) stay as they were.
    std::span<const std::uint8_t> wire = bytes;
    if (admission == EgressQueue::Admission::kMark) {
      marked.assign(bytes.begin(), bytes.end());
      if (mark_ecn(marked)) {
        ++c.counters.ecn_marked;
        wire = marked;
      }
    }
    ns3::Ptr<ns3::Packet> p = ns3::Create<ns3::Packet>(wire.data(), static_cast<std::uint32_t>(wire.size()));
    if (n.is_host) {
      const ns3::InetSocketAddress to(ns3::Ipv4Address(h.dst), kUdpPort);
      if (waits) {
        c.waiting.push(flow, Waiting{p, to}, wire.size() + kEncapsulationBytes);
      } else {
        emit(c, p, host_sender(n, to));
      }
      return;
    }
    ns3::UdpHeader udp;
    udp.SetSourcePort(kUdpPort);
    udp.SetDestinationPort(kUdpPort);
    p->AddHeader(udp);
    ns3::Ipv4Header ip;
    ip.SetSource(ns3::Ipv4Address(h.src));
    ip.SetDestination(ns3::Ipv4Address(h.dst));
    ip.SetProtocol(kUdpProtocol);
    ip.SetPayloadSize(p->GetSize());
    ip.SetTtl(64);
    p->AddHeader(ip);
    emit(c, p, device_sender(c));
  }

  // The device of a fair-queueing channel finished a packet: once that event is over (the device
  // has taken what its own queue holds, e.g. a TCP ACK), the next waiting packet in turn goes.
  void device_done(std::size_t cid) {
    Channel& c = channels[cid];
    if (c.waiting.empty() || c.next_in_turn_pending) return;
    c.next_in_turn_pending = true;
    ns3::Simulator::ScheduleNow([this, cid] {
      Channel& ch = channels[cid];
      ch.next_in_turn_pending = false;
      if (ch.waiting.empty() || device_busy(ch)) return;  // the next device_done tries again
      Waiting w = ch.waiting.pop();
      emit(ch, w.packet, host_sender(nodes[ch.from], w.to));
    });
  }

  // Hands `p` to `send` (its channel's device or host socket), with the channel's duplication and
  // reordering: as in EgressQueue, a duplicate follows 100 ns later and a reordered packet is held
  // back by 1-3 link delays (at least 1 us); here both happen before the device's queue (on a
  // fair-queueing host, as the packet leaves the fair queue, and the copies go straight to the
  // device), so a duplicate uses the link twice. Draws come from the channel's own seeded stream.
  template <class Send>
  void emit(Channel& c, ns3::Ptr<ns3::Packet> p, Send send) {
    if (c.config.duplicate <= 0 && c.config.reorder <= 0) {
      send(p);
      return;
    }
    std::uniform_real_distribution<double> uniform01(0, 1);
    const bool duplicate = c.config.duplicate > 0 && uniform01(c.rng) < c.config.duplicate;
    if (c.config.reorder > 0 && uniform01(c.rng) < c.config.reorder) {
      const double factor = 1.0 + 2.0 * uniform01(c.rng);
      const Duration hold = std::max<Duration>(std::chrono::microseconds(1),
                                               Duration(static_cast<std::int64_t>(factor * c.config.delay.count())));
      ++c.counters.reordered;
      ns3::Simulator::Schedule(to_ns3(hold), [send, q = p->Copy()] { send(q); });
    } else {
      send(p->Copy());
    }
    if (duplicate) {
      ++c.counters.duplicated;
      ns3::Simulator::Schedule(ns3::NanoSeconds(100), [send, q = p->Copy()] { send(q); });
    }
  }

  // Every IPv4 packet a switch's device receives.
  void switch_receive(NodeId id, PortId port, ns3::Ptr<const ns3::Packet> packet) {
    NodeState& n = nodes[id];
    ns3::Ptr<ns3::Packet> p = packet->Copy();
    ns3::Ipv4Header ip;
    p->RemoveHeader(ip);
    if (ip.GetProtocol() == kUdpProtocol && ip.IsLastFragment() && ip.GetFragmentOffset() == 0) {
      ns3::UdpHeader udp;
      p->PeekHeader(udp);
      if (udp.GetDestinationPort() == kUdpPort) {
        p->RemoveHeader(udp);
        received.resize(p->GetSize());
        p->CopyData(received.data(), received.size());
        n.node->on_packet(port, received, now(), *n.sink);
        rearm(id);
        return;
      }
    }
    // Anything else is forwarded by destination, like a router (TTL and checksum untouched).
    const auto route = n.routes.find(ip.GetDestination().Get());
    if (route == n.routes.end() || route->second >= n.channel_by_port.size() ||
        n.channel_by_port[route->second] == kNoChannel) {
      return;  // the plan routes every host's address: only traffic to no host ends here
    }
    const auto cid = static_cast<std::size_t>(n.channel_by_port[route->second]);
    Channel& c = channels[cid];
    // As EgressQueue: CE on ECN-capable packets past the threshold; of the others (never marked)
    // some are dropped (RFC 3168 §7, UnmarkableDrops), but not small ones (SYNs, pure ACKs:
    // ecn_drops_frame, counted at their size on an Ethernet link).
    const std::size_t ip_bytes = ip.GetSerializedSize() + p->GetSize();
    const auto ecn = ip.GetEcn();
    const bool unmarkable = ecn == ns3::Ipv4Header::ECN_NotECT && kEthernetHeaderBytes + ip_bytes >= kEcnDropMinBytes;
    const EgressQueue::Admission admission = admit(c, ip_bytes, unmarkable);
    if (admission == EgressQueue::Admission::kFull) {
      egress_refused(cid);
      return;
    }
    if (admission == EgressQueue::Admission::kUnmarkable) {
      ++c.counters.queue_drops;
      return;
    }
    if (admission == EgressQueue::Admission::kMark && ecn != ns3::Ipv4Header::ECN_NotECT &&
        ecn != ns3::Ipv4Header::ECN_CE) {
      ip.SetEcn(ns3::Ipv4Header::ECN_CE);
      ++c.counters.ecn_marked;
    }
    p->AddHeader(ip);
    emit(c, p, device_sender(c));
  }

  void host_receive(NodeId id, ns3::Ptr<ns3::Socket> socket) {
    NodeState& n = nodes[id];
    while (ns3::Ptr<ns3::Packet> p = socket->Recv()) {
      received.resize(p->GetSize());
      p->CopyData(received.data(), received.size());
      n.node->on_packet(0, received, now(), *n.sink);
    }
    rearm(id);
  }

  // As the in-process network: arm a timer event if the node's deadline moved earlier than the
  // armed one; a node still due right after on_timeout is retried 1 ns later.
  void rearm(NodeId id, bool after_timeout = false) {
    NodeState& n = nodes[id];
    const Time deadline = n.node->next_deadline();
    if (deadline == kNever) return;
    const Time current = now();
    const Time at = std::max(deadline, after_timeout ? current + Duration(1) : current);
    if (at >= n.armed_timer) return;
    n.armed_timer = at;
    const std::uint64_t generation = ++n.timer_generation;
    ns3::Simulator::Schedule(to_ns3(at - current), [this, id, generation] { fire(id, generation); });
  }

  void fire(NodeId id, std::uint64_t generation) {
    NodeState& n = nodes[id];
    if (generation == n.timer_generation) n.armed_timer = kNever;
    const Time current = now();
    const bool due = n.node->next_deadline() <= current;
    if (due) n.node->on_timeout(current, *n.sink);
    rearm(id, due);
  }

  Time now() const { return time_from_ns(ns3::Simulator::Now().GetNanoSeconds()); }

  // A queue of channel `cid` dropped a packet its sender handed it: counted, and the sender told
  // (sim::Node::on_egress_full) right after the event in which it sent it.
  void egress_refused(std::size_t cid) {
    ++channels[cid].counters.queue_drops;
    const NodeId id = channels[cid].from;
    if (nodes[id].egress_full_pending) return;
    nodes[id].egress_full_pending = true;
    ns3::Simulator::ScheduleNow([this, id] {
      nodes[id].egress_full_pending = false;
      nodes[id].node->on_egress_full(now());
      rearm(id);
    });
  }

  // The channel from node `from`'s `from_port` (device `tx`) to node `to` (device `rx`) on `link`,
  // with its counters and transmitter state from the devices' traces. Returns its id.
  std::size_t add_channel(NodeId from, PortId from_port, ns3::Ptr<ns3::NetDevice> tx, NodeId to,
                          ns3::Ptr<ns3::NetDevice> rx, ns3::Ptr<ns3::PointToPointChannel> link,
                          const sim::ChannelConfig& config);
  // The node's side of its `device` on `port`: a host's IPv4 interface, or a switch's IPv4 handler.
  void attach_device(NodeId id, PortId port, ns3::Ptr<ns3::NetDevice> device);

  NodeId add(std::string name, std::unique_ptr<sim::Node> node) {
    if (!node) throw std::invalid_argument("add node '" + name + "': node is null");
    const auto id = static_cast<NodeId>(nodes.size());
    NodeState s;
    s.name = std::move(name);
    s.node = std::move(node);
    s.sink = std::make_unique<NodeSink>(this, id);
    s.ns3 = ns3::CreateObject<ns3::Node>();
    nodes.push_back(std::move(s));
    return id;
  }

  std::uint64_t seed;
  std::uint32_t mtu_bytes;
  std::vector<NodeState> nodes;
  std::vector<Channel> channels;
  // Reused buffers. A node's sends never deliver synchronously (devices and sockets schedule),
  // so a packet being handled is never overwritten by the next one.
  std::vector<std::uint8_t> received;  // the packet a node is handling
  std::vector<std::uint8_t> marked;    // an ECN-marked copy on its way out
  std::uint64_t events_at_start = 0;
};

}  // namespace atp::ns3adapter
