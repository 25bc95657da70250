// One dataplane thread of the switch daemon (private to the runtime): its share of the aggregator
// table (a SwitchPipeline over a TableSlice), its own ports (sockets), its own per-port queues,
// and its EventLoop. It receives bursts, hands each ATP packet whose aggregator another thread
// holds to that thread's inbox, runs the rest through its pipeline, and sends what its queues
// release, a batch per port. SwitchDataplane (switch_dataplane.h) runs one or more of them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "atp/daemons/switch_daemon.h"
#include "atp/io/egress_queue.h"
#include "atp/io/event_loop.h"
#include "atp/io/loop_tasks.h"
#include "atp/switch.h"
#include "switch_ports.h"

namespace atp::detail {

// The most bytes a shard's inbox holds: a few full bursts of the widest runs.
inline constexpr std::size_t kShardInboxBytes = std::size_t{16} << 20;

// Packets one dataplane thread hands to another, the one that holds their aggregator: copied into
// one flat buffer under a mutex (a lock per packet, uncontended but for a moment), taken out
// whole by the owner, whose loop an eventfd wakes. Bounded: a packet beyond max_bytes is refused
// (the caller counts it, as a full port would drop it).
class ShardInbox {
 public:
  // Packets and the ports they arrived on, in arrival order.
  struct Batch {
    struct Entry {
      PortId from = 0;
      std::size_t offset = 0;
      std::size_t size = 0;
    };
    std::vector<std::uint8_t> bytes;
    std::vector<Entry> entries;
    std::span<std::uint8_t> packet(std::size_t i) { return {bytes.data() + entries[i].offset, entries[i].size}; }
  };

  // Throws std::system_error when there is no eventfd to be had.
  explicit ShardInbox(std::size_t max_bytes);
  ~ShardInbox();
  ShardInbox(const ShardInbox&) = delete;
  ShardInbox& operator=(const ShardInbox&) = delete;

  // Readable while packets wait (the owner's EventLoop watches it).
  int fd() const { return fd_; }
  // Any thread: queues a copy of `packet`, from port `from`; false when the inbox holds max_bytes.
  bool put(PortId from, std::span<const std::uint8_t> packet);
  // The owner: swaps everything waiting into `out` (whose old contents are dropped, its storage
  // reused for the next puts).
  void take(Batch& out);

 private:
  int fd_ = -1;  // eventfd
  std::size_t max_bytes_;
  std::mutex mutex_;
  Batch waiting_;       // under mutex_
  bool woken_ = false;  // under mutex_: fd_ was written since the last take()
};

// Everything here runs on the shard's own thread (its EventLoop's), the only one to touch its
// pipeline, ports and queues, except where said; the control plane reaches it through tasks().
class SwitchShard {
 public:
  struct PortCounters {
    // Datagrams (frames on interface ports) received from the port's peer, before its ingress queue.
    std::uint64_t rx_packets = 0;
    std::uint64_t rx_bytes = 0;
  };
  // Where a port's queues' transmitters are shared with the other shards' queues of that port
  // (null: this shard's queues have their own, as the only shard's do).
  struct PortLink {
    std::shared_ptr<SharedTransmitter> egress;
    std::shared_ptr<SharedTransmitter> ingress;
  };

  // `open_ports(routes)` gives this shard's ports (interface ports keep `routes`, the shard's, to
  // check what they learn); `slice`: its share of the table; `links`: port i's transmitters.
  // Makes every port's queues and installs config.routes. `config` has passed check_limits.
  SwitchShard(const SwitchDaemonConfig& config, TableSlice slice,
              const std::function<std::unique_ptr<SwitchPorts>(const Routes&)>& open_ports,
              const std::vector<PortLink>& links);
  SwitchShard(const SwitchShard&) = delete;
  SwitchShard& operator=(const SwitchShard&) = delete;

  // The inboxes of every shard, this one's included, indexed by slice: where packets whose
  // aggregator another shard holds go. Called once, before the loop runs.
  void connect(std::vector<ShardInbox*> inboxes) { inboxes_ = std::move(inboxes); }
  ShardInbox& inbox() { return inbox_; }

  EventLoop& loop() { return loop_; }
  LoopTasks& tasks() { return tasks_; }
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
  void set_ingress(PortId port, const EgressConfig& settings, const PortLink& link);
  // Port `port` as new: an empty egress queue with default settings (unlimited) on its own
  // stream, no ingress queue, counters zero.
  void reset_port(PortId port, const PortLink& link);
  // A new port after the last, as reset_port() leaves one.
  PortId add_port(const PortLink& link);

  // ---- routes: the pipeline's, each also kept in routes_ ----
  void add_route(Address dst, PortId port);
  void remove_routes_to(PortId port);  // every route to `port`
  void remove_route(Address dst);
  std::optional<PortId> route_of(Address dst) const;
  // The overlay address of the host on port p: the lowest destination routed to p, if any.
  std::optional<Address> address_of(PortId p) const;
  // The lowest address of [first, last] that is no route's destination; nullopt when all are.
  std::optional<Address> free_address(Address first, Address last) const;

  // Sends to a port number the switch lacks, or to a detached port: dropped.
  std::uint64_t no_port() const { return no_port_; }
  // Released packets the kernel refused: dropped.
  std::uint64_t send_failed() const { return send_failed_; }
  // Packets received here for another shard's aggregator, handed to its inbox.
  std::uint64_t handed_off() const { return handed_off_; }
  // Packets for another shard's aggregator that its full inbox refused: dropped.
  std::uint64_t handoff_drops() const { return handoff_drops_; }

 private:
  // Where SwitchPipeline puts its sends: the port's egress queue, at the time of the batch, in
  // the form the port carries (SwitchPorts::encapsulate).
  class QueueSink final : public PortSink {
   public:
    explicit QueueSink(SwitchShard& shard) : shard_(shard) {}
    void send(PortId port, std::span<const std::uint8_t> packet) override;
    Time now{};
    // The packet in the pipeline when its bytes stay as they are until flush() (a received one,
    // not one an ingress queue released): sent as it is to a port whose queue passes it through.
    std::span<const std::uint8_t> in_hand{};

   private:
    SwitchShard& shard_;
  };

  void on_readable(std::size_t source);
  void on_inbox();
  void process_ingress(Time now);
  // `stable`: the packet's bytes stay as they are until flush() (QueueSink::in_hand).
  void deliver(PortId from, std::span<std::uint8_t> packet, Time now, bool stable);
  void flush(Time now);
  // Port p's egress queue (`ingress`: its ingress queue) as new, on its fault stream, fed to
  // `transmitter` when the port's transmitter is shared.
  EgressQueue new_queue(PortId p, bool ingress, const EgressConfig& settings,
                        const std::shared_ptr<SharedTransmitter>& transmitter) const;

  std::uint64_t seed_;  // config.seed: the queues' fault draws
  TableSlice slice_;
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
  // Per port: packets the pipeline sent that its queue passes through, in order, pointing into the
  // received bytes (QueueSink::in_hand), which stay valid until flush() sends them.
  std::vector<std::vector<std::span<const std::uint8_t>>> passed_;
  std::vector<std::vector<std::uint8_t>> tx_bytes_;  // flush()'s released packets, swapped out of the queues
  std::vector<SwitchPorts::Outgoing> tx_;            // flush()'s batch, pointing into tx_bytes_
  ShardInbox inbox_;                                 // packets other shards hand to this one
  ShardInbox::Batch handed_;                         // on_inbox()'s batch, reused
  std::vector<ShardInbox*> inboxes_;                 // every shard's, by slice
  std::uint64_t no_port_ = 0;
  std::uint64_t send_failed_ = 0;
  std::uint64_t handed_off_ = 0;
  std::uint64_t handoff_drops_ = 0;
  EventLoop loop_;
  LoopTasks tasks_;  // the control plane's requests, run on this shard's thread
};

}  // namespace atp::detail
