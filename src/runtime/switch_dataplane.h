// The switch daemon's dataplane (private to the runtime): receives bursts from the ports, runs
// SwitchPipeline, fills the per-port queues and sends what they release, a batch per port.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "atp/runtime/egress_queue.h"
#include "atp/runtime/event_loop.h"
#include "atp/runtime/switch_daemon.h"
#include "atp/switch.h"
#include "switch_ports.h"

namespace atp::detail {

// Everything here runs on the dataplane thread (the EventLoop's), the only one to touch the
// pipeline, the ports and the queues; the control plane reaches them through LoopTasks.
class SwitchDataplane {
 public:
  struct PortCounters {
    // Datagrams (frames on interface ports) received from the port's peer, before its ingress queue.
    std::uint64_t rx_packets = 0;
    std::uint64_t rx_bytes = 0;
  };

  // Opens the ports (throws UdpSetupError, or PacketSetupError naming the interface), makes
  // every port's queues and installs config.routes. `config` has passed check_limits.
  explicit SwitchDataplane(const SwitchDaemonConfig& config);
  SwitchDataplane(const SwitchDataplane&) = delete;
  SwitchDataplane& operator=(const SwitchDataplane&) = delete;

  // Reads the ports whenever `loop` sees them readable.
  void watch(EventLoop& loop);
  // The earliest of the pipeline's timers and the queues' releases (kNever: none).
  Time next_deadline() const;
  // The pipeline's timers, then whatever the queues release by `now`.
  void on_deadline(Time now);

  SwitchPipeline& pipeline() { return pipeline_; }
  const SwitchPipeline& pipeline() const { return pipeline_; }
  SwitchPorts& ports() { return *ports_; }
  const SwitchPorts& ports() const { return *ports_; }

  // ---- ports: their number grows with POST /hosts ----
  std::size_t port_count() const { return queues_.size(); }
  const EgressQueue& egress(PortId port) const { return queues_[port]; }
  const std::optional<EgressQueue>& ingress(PortId port) const { return ingress_queues_[port]; }
  const PortCounters& port_counters(PortId port) const { return port_counters_[port]; }
  // Port `port`'s settings for packets enqueued from now on; set_ingress creates its ingress
  // queue if it had none.
  void set_egress(PortId port, const EgressConfig& settings) { queues_[port].config() = settings; }
  void set_ingress(PortId port, const EgressConfig& settings);
  // Port `port` as new: an empty egress queue with default settings (unlimited) on its own
  // stream, no ingress queue, counters zero.
  void reset_port(PortId port);
  // A new port after the last, as reset_port() leaves one.
  PortId add_port();

  // ---- routes: the pipeline's, each also kept in routes_ ----
  void add_route(Address dst, PortId port);
  void remove_routes_to(PortId port);  // every route to `port`
  // The overlay address of the host on port p: the lowest destination routed to p, if any.
  std::optional<Address> address_of(PortId p) const;
  // The lowest host address that is no route's destination; nullopt when 10.0.0.0/8 is full.
  std::optional<Address> free_address() const;

  // Sends to a port number the switch lacks, or to a detached port: dropped.
  std::uint64_t no_port() const { return no_port_; }
  // Released packets the kernel refused: dropped.
  std::uint64_t send_failed() const { return send_failed_; }

 private:
  // Where SwitchPipeline puts its sends: the port's egress queue, at the time of the batch, in
  // the form the port carries (SwitchPorts::encapsulate).
  class QueueSink final : public PortSink {
   public:
    explicit QueueSink(SwitchDataplane& dataplane) : dataplane_(dataplane) {}
    void send(PortId port, std::span<const std::uint8_t> packet) override;
    Time now{};

   private:
    SwitchDataplane& dataplane_;
  };

  void on_readable(std::size_t source);
  void process_ingress(Time now);
  void deliver(PortId from, std::span<std::uint8_t> packet, Time now);
  void flush(Time now);

  std::uint64_t seed_;  // config.seed: the queues' fault draws
  SwitchPipeline pipeline_;
  // Every route the pipeline has (config.routes, then POST and DELETE /hosts): the interface
  // ports' check before they learn an IP's MAC, and where POST /hosts finds a host's address and
  // a free one.
  Routes routes_;
  std::unique_ptr<SwitchPorts> ports_;                      // UDP peers or Linux interfaces
  std::vector<EgressQueue> queues_;                         // port i's egress
  std::vector<std::optional<EgressQueue>> ingress_queues_;  // port i's ingress, if it has one
  std::vector<PortCounters> port_counters_;
  QueueSink sink_;
  std::vector<std::vector<std::uint8_t>> tx_bytes_;  // flush()'s released packets, swapped out of the queues
  std::vector<SwitchPorts::Outgoing> tx_;            // flush()'s batch, pointing into tx_bytes_
  std::uint64_t no_port_ = 0;
  std::uint64_t send_failed_ = 0;
};

}  // namespace atp::detail
