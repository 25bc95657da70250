// The ns-3 adapter: sim::Network on ns-3's simulator, so the scenario runner's switch and host
// nodes (the unchanged protocol core) run at paper scale. It moves packets and time, nothing else.
//
// Links are point-to-point devices with the scenario's rate, delay, drop-tail buffer, loss and MTU.
// Hosts have ns-3's IPv4/UDP/TCP stack: a host node's ATP packets leave through a UDP socket on
// kUdpPort (to the header's dst, a host or the job's multicast group) and arrive through it.
// Switches have no IP stack: every IPv4 packet from a device comes to the adapter, which hands
// UDP to kUdpPort to the switch node without its IPv4/UDP headers and wraps what the node sends
// in new ones (addresses from the ATP header); any other IPv4 packet (TCP) is forwarded by its
// destination along the switch's routes. Every packet a switch or host sends is ECN-marked when
// its egress queue (including the packet being sent) holds ecn_threshold_packets: the ATP flag
// for ATP packets, CE for ECN-capable IPv4; a switch drops some other IPv4 there (RFC 3168 §7;
// io/egress_queue.h's UnmarkableDrops: the first, then every other).
#pragma once

#include <ns3/node.h>
#include <ns3/nstime.h>
#include <ns3/ptr.h>

#include <cstdint>
#include <memory>

#include "atp/sim/simulated_network.h"

namespace atp::ns3adapter {

// A Duration as ns-3's time (the adapter sets a resolution of picoseconds: exact), for the
// adapter and the applications that schedule on its simulator.
inline ns3::Time to_ns3(Duration d) { return ns3::NanoSeconds(d.count()); }

class Ns3Network final : public sim::Network {
 public:
  // A point-to-point link's MTU can be at most this (its attribute is 16 bits wide), and the
  // least an IPv4 link has.
  static constexpr std::uint32_t kMinMtuBytes = 576;
  static constexpr std::uint32_t kMaxMtuBytes = 65535;
  // Seeds ns-3's random streams (loss) from `seed`; every link carries IP packets of up to
  // `mtu_bytes` (std::invalid_argument outside kMinMtuBytes..kMaxMtuBytes). ns-3's simulator is a
  // process-wide singleton: only one Ns3Network may exist at a time (std::logic_error otherwise).
  Ns3Network(std::uint64_t seed, std::uint32_t mtu_bytes);
  ~Ns3Network() override;  // destroys the simulation (Simulator::Destroy)
  Ns3Network(const Ns3Network&) = delete;
  Ns3Network& operator=(const Ns3Network&) = delete;

  sim::NodeId add_switch(std::string name, std::unique_ptr<sim::Node> node, std::map<Address, PortId> routes) override;
  sim::NodeId add_host(std::string name, std::unique_ptr<sim::Node> node, Address address) override;
  // Throws std::invalid_argument for what a point-to-point link cannot model: different delays
  // in the two directions.
  std::pair<std::size_t, std::size_t> connect(sim::NodeId a, PortId port_a, sim::NodeId b, PortId port_b,
                                              const sim::ChannelConfig& a_to_b,
                                              const sim::ChannelConfig& b_to_a) override;
  void set_channel_config(std::size_t channel, const sim::ChannelConfig& config) override;
  // packets and bytes are what the device sent (bytes: whole packets with their IPv4/UDP or
  // TCP headers and the 2-byte PPP header); lost: dropped by the receiver's loss model.
  sim::ChannelCounters channel_counters(std::size_t channel) const override;

  void schedule(Time t, std::function<void(Time)> f) override;
  void wake(sim::NodeId node) override;
  PortSink& sink_for(sim::NodeId node) override;
  Time now() const override;
  std::uint64_t run_until(Time limit) override;
  std::uint64_t events_processed() const override;
  std::uint32_t mtu_bytes() const override;

  // The ns-3 node behind a host or switch, for applications (TCP collectives, background flows).
  ns3::Ptr<ns3::Node> ns3_node(sim::NodeId node) const;
  // Packets sent on all links so far (the simulator's work, for packets per wall second).
  std::uint64_t link_packets() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace atp::ns3adapter
