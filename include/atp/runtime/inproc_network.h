// A deterministic in-process network: a virtual clock, an event queue, and links whose egress
// queues (atp::EgressQueue) add delay, rate, ECN marks and seeded faults. Same seed, same trace.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "atp/packet_sink.h"
#include "atp/runtime/egress_queue.h"
#include "atp/time.h"
#include "atp/wire.h"

namespace atp::inproc {

using NodeId = std::uint32_t;

// Anything with ports that reacts to packets and time: a switch, or a host running endpoints.
class Node {
 public:
  virtual ~Node() = default;
  virtual void on_packet(PortId port, std::span<std::uint8_t> packet, Time now, PortSink& out) = 0;
  virtual void on_timeout(Time now, PortSink& out) = 0;
  virtual Time next_deadline() const = 0;
};

// One direction of a link: the egress queue of its sender's port, with a propagation delay.
struct ChannelConfig : EgressConfig {
  ChannelConfig() { delay = std::chrono::microseconds(2); }  // propagation delay
};

using ChannelCounters = EgressCounters;

class Network {
 public:
  explicit Network(std::uint64_t seed);
  ~Network();
  Network(const Network&) = delete;
  Network& operator=(const Network&) = delete;

  NodeId add_node(std::string name, std::unique_ptr<Node> node);
  Node& node(NodeId id);
  const std::string& node_name(NodeId id) const;

  // A bidirectional link between (a, port_a) and (b, port_b). Returns the channel ids of the
  // a->b and b->a directions.
  std::pair<std::size_t, std::size_t> connect(NodeId a, PortId port_a, NodeId b, PortId port_b,
                                              const ChannelConfig& a_to_b, const ChannelConfig& b_to_a);
  ChannelConfig& channel_config(std::size_t channel);  // change faults between events
  const ChannelCounters& channel_counters(std::size_t channel) const;
  std::size_t channel_count() const;
  NodeId channel_from(std::size_t channel) const;
  NodeId channel_to(std::size_t channel) const;

  // Calls f(now) at time t (a scenario's scripted action, e.g. a crash or the next round); a
  // time in the past means now. Afterwards every node's deadline is re-read.
  void schedule(Time t, std::function<void(Time)> f);
  // Re-reads node's next_deadline(); call after touching a node outside of its callbacks.
  void wake(NodeId node);
  // Lets a node send outside its callbacks (e.g. an application starting a round).
  PortSink& sink_for(NodeId node);

  Time now() const;
  // Runs events until none is left or the next one is after `limit` (events at `limit` run);
  // then the clock reads `limit` unless it is kNever. Returns events processed.
  std::uint64_t run_until(Time limit);
  std::uint64_t run_until_idle() { return run_until(kNever); }
  std::uint64_t events_processed() const;
  // Packets a node sent out of a port that connect() never wired up; dropped.
  std::uint64_t unconnected_drops() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace atp::inproc
