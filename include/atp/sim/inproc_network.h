// A deterministic in-process network: a virtual clock, an event queue, and links whose egress
// queues (atp::EgressQueue) add delay, rate, ECN marks and seeded faults. Same seed, same trace.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "atp/sim/simulated_network.h"

namespace atp::inproc {

using sim::ChannelConfig;
using sim::ChannelCounters;
using sim::Node;
using sim::NodeId;

class Network final : public sim::Network {
 public:
  // `mtu_bytes`: the largest IP packet its links are said to carry (NetworkPlan::mtu_bytes, which
  // sizes default fragments; nothing checks a packet against it); 0: any size (a packet is bytes
  // in memory).
  explicit Network(std::uint64_t seed, std::uint32_t mtu_bytes = 0);
  ~Network() override;
  Network(const Network&) = delete;
  Network& operator=(const Network&) = delete;

  NodeId add_node(std::string name, std::unique_ptr<Node> node);
  // Switches and hosts are plain nodes here: every packet is the node's, so routes go unused.
  NodeId add_switch(std::string name, std::unique_ptr<Node> node, std::map<Address, PortId>) override {
    return add_node(std::move(name), std::move(node));
  }
  NodeId add_host(std::string name, std::unique_ptr<Node> node, Address) override {
    return add_node(std::move(name), std::move(node));
  }
  Node& node(NodeId id);
  const std::string& node_name(NodeId id) const;

  std::pair<std::size_t, std::size_t> connect(NodeId a, PortId port_a, NodeId b, PortId port_b,
                                              const ChannelConfig& a_to_b, const ChannelConfig& b_to_a) override;
  void set_channel_config(std::size_t channel, const ChannelConfig& config) override;
  ChannelCounters channel_counters(std::size_t channel) const override;
  std::size_t channel_count() const;
  NodeId channel_from(std::size_t channel) const;
  NodeId channel_to(std::size_t channel) const;

  void schedule(Time t, std::function<void(Time)> f) override;
  void wake(NodeId node) override;
  PortSink& sink_for(NodeId node) override;

  Time now() const override;
  // As sim::Network; then the clock reads `limit` unless it is kNever.
  std::uint64_t run_until(Time limit) override;
  std::uint64_t run_until_idle() { return run_until(kNever); }
  std::uint64_t events_processed() const override;
  std::uint32_t mtu_bytes() const override { return mtu_bytes_; }
  // Packets a node sent out of a port that connect() never wired up; dropped.
  std::uint64_t unconnected_drops() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::uint32_t mtu_bytes_;
};

}  // namespace atp::inproc
