// A simulated network as the scenario runner sees it: nodes that react to packets and time,
// links with egress settings, a clock and scripted actions. Two implementations: the in-process
// network (atp/sim/inproc_network.h) and ns-3 (atp/sim/ns3_network.h).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>

#include "atp/io/egress_queue.h"
#include "atp/packet_sink.h"
#include "atp/time.h"
#include "atp/wire.h"

namespace atp::sim {

using NodeId = std::uint32_t;

// Anything with ports that reacts to packets and time: a switch, or a host running endpoints.
// Packets are bare ATP packets; a network that carries them in IPv4/UDP adds and strips that.
class Node {
 public:
  virtual ~Node() = default;
  virtual void on_packet(PortId port, std::span<std::uint8_t> packet, Time now, PortSink& out) = 0;
  virtual void on_timeout(Time now, PortSink& out) = 0;
  virtual Time next_deadline() const = 0;
  // One of its egress queues refused a packet it sent (full, or past the ECN threshold and
  // unmarkable): the network says so right after the event that sent it, at the same time, once
  // per run of refusals. A host slows down every worker it runs with fragments in flight: its
  // NIC's queue is one bottleneck that they all fill, as Linux's full qdisc fails the sends
  // (ENOBUFS) of every socket that keeps sending into it.
  virtual void on_egress_full(Time /*now*/) {}
};

// One direction of a link: the egress queue of its sender's port, with a propagation delay.
struct ChannelConfig : EgressConfig {
  ChannelConfig() { delay = std::chrono::microseconds(2); }  // propagation delay
  // A host's NIC: the packets waiting for the transmitter take turns by ATP job (FairQueue, as a
  // host's fq_codel serves each socket), so one job's window does not delay another's packets;
  // the buffer counts them all, and when it is full the job with the most bytes waiting loses
  // one (FairQueue::drop_for). Without a rate nothing waits. Off: one FIFO.
  bool fair_queueing = false;
};

using ChannelCounters = EgressCounters;

// The PortSink a network hands to its node `node`: send(port) becomes
// net->transmit(node, port, packet), which puts the bytes on the link leaving that port.
template <class Net>
class NodeSink final : public PortSink {
 public:
  NodeSink(Net* net, NodeId node) : net_(net), node_(node) {}
  void send(PortId port, std::span<const std::uint8_t> packet) override { net_->transmit(node_, port, packet); }

 private:
  Net* net_;
  NodeId node_;
};

class Network {
 public:
  virtual ~Network() = default;

  // A switch: `routes` (destination host -> port) forward the traffic its node does not handle
  // (TCP on a network that carries it); the node's own pipeline has its own copy.
  virtual NodeId add_switch(std::string name, std::unique_ptr<Node> node, std::map<Address, PortId> routes) = 0;
  // An end host with one port (0) and the given address.
  virtual NodeId add_host(std::string name, std::unique_ptr<Node> node, Address address) = 0;

  // A bidirectional link between (a, port_a) and (b, port_b). Returns the channel ids of the
  // a->b and b->a directions. Throws std::invalid_argument for settings the network cannot model.
  virtual std::pair<std::size_t, std::size_t> connect(NodeId a, PortId port_a, NodeId b, PortId port_b,
                                                      const ChannelConfig& a_to_b, const ChannelConfig& b_to_a) = 0;
  // Replaces a channel's settings (a fault starting or ending); applies to packets sent afterwards.
  virtual void set_channel_config(std::size_t channel, const ChannelConfig& config) = 0;
  virtual ChannelCounters channel_counters(std::size_t channel) const = 0;

  // Calls f(now) at time t (a scenario's scripted action, e.g. a crash or the next round); a
  // time in the past means now. Afterwards every node's deadline is re-read.
  virtual void schedule(Time t, std::function<void(Time)> f) = 0;
  // Re-reads node's next_deadline(); call after touching a node outside of its callbacks.
  virtual void wake(NodeId node) = 0;
  // Lets a node send outside its callbacks (e.g. an application starting a round).
  virtual PortSink& sink_for(NodeId node) = 0;

  virtual Time now() const = 0;
  // Runs events until none is left or the next one is after `limit` (events at `limit` run).
  // Returns events processed.
  virtual std::uint64_t run_until(Time limit) = 0;
  virtual std::uint64_t events_processed() const = 0;
  // The largest IP packet (headers included) a link carries; 0: any size (NetworkPlan::mtu_bytes).
  virtual std::uint32_t mtu_bytes() const = 0;
};

}  // namespace atp::sim
