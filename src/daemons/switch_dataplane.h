// The switch daemon's dataplane (private to the runtime): its dataplane threads (SwitchShard),
// each holding a slice of the aggregator table, its own sockets and its own queues, and what the
// control plane does to all of them at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "atp/daemons/switch_daemon.h"
#include "atp/io/egress_queue.h"
#include "atp/io/loop_tasks.h"
#include "atp/switch.h"
#include "switch_shard.h"

namespace atp::detail {

// Where packets go: the UDP ports share one address (SO_REUSEPORT), and a socket filter hands each
// datagram to the thread whose slice holds its aggregator (a run of datagrams received as one
// goes by its first; a thread that gets a packet for another's slice hands it over through that
// thread's inbox). Each interface's sockets form a fan-out group (PACKET_FANOUT) whose filter
// does the same for ATP frames and gives every other frame to thread 0, which does all the
// Ethernet switching; the threads share what they learn of hosts' MAC addresses.
//
// The control plane runs on shard 0's thread (control_tasks()). What it changes, it changes on
// every shard: on shard 0 at once, on the others through their tasks, waited for (a second at
// most each). What it reads of the configuration (ports, routes, peers), it reads from shard 0,
// which has what every shard has; counters are summed over the shards (totals()).
class SwitchDataplane {
 public:
  // What one dataplane thread did, as GET /stats reports it.
  using ThreadLoad = control::SwitchThreadLoad;
  // What GET /stats reports, summed over the shards.
  struct Totals {
    SwitchCounters pipeline;
    std::uint32_t aggregators_in_use = 0;
    std::unordered_map<JobId, SwitchJobCounters> jobs;
    std::vector<EgressCounters> egress;   // by port
    std::vector<EgressCounters> ingress;  // by port; zero where a port has no ingress queue
    std::vector<SwitchShard::PortCounters> rx;
    std::vector<std::uint64_t> kernel_drops;  // by port: frames the kernel dropped before a thread read them
    SwitchPortsCounters ports;
    std::uint64_t no_port = 0;
    std::uint64_t send_failed = 0;
    std::vector<ThreadLoad> threads;  // by shard
  };

  // Opens every shard's ports (throws UdpSetupError, or PacketSetupError naming the interface),
  // makes every port's queues and installs config.routes. `config` has passed check_limits.
  explicit SwitchDataplane(const SwitchDaemonConfig& config);
  ~SwitchDataplane();
  SwitchDataplane(const SwitchDataplane&) = delete;
  SwitchDataplane& operator=(const SwitchDataplane&) = delete;

  // Starts a thread per shard. Shard 0's also serves the control plane: its timer adds
  // `control_deadline()` and calls `on_control_deadline(now)` before the shard's own work.
  void start(std::function<Time()> control_deadline, std::function<void(Time)> on_control_deadline);
  void stop();  // ends every thread; idempotent
  // Where the control plane's requests run: shard 0's thread.
  LoopTasks& control_tasks() { return shards_.front()->tasks(); }
  std::size_t threads() const { return shards_.size(); }
  // CPU time (s) the dataplane threads have used, all together; 0 when they do not run.
  double cpu_seconds();

  // ---- read from shard 0 (the configuration every shard has) ----
  const SwitchPorts& ports() const { return shards_.front()->ports(); }
  std::size_t port_count() const { return shards_.front()->port_count(); }
  const EgressConfig& egress_config(PortId port) const { return shards_.front()->egress(port).config(); }
  // Port `port`'s ingress settings, if it has an ingress queue.
  std::optional<EgressConfig> ingress_config(PortId port) const;
  std::optional<Address> address_of(PortId p) const { return shards_.front()->address_of(p); }
  std::optional<Address> free_address(Address first, Address last) const {
    return shards_.front()->free_address(first, last);
  }
  Totals totals();

  // ---- changed on every shard ----
  void install_job(const SwitchJobEntry& entry, Address group, const std::vector<PortId>& group_ports);
  // Removes the job (freeing its aggregators) and its multicast group.
  void remove_job(JobId job, Address group);
  void set_egress(PortId port, const EgressConfig& settings);
  void set_ingress(PortId port, const EgressConfig& settings);
  void reset_port(PortId port);
  PortId add_port();
  void add_route(Address dst, PortId port);
  void remove_routes_to(PortId port);
  void remove_route(Address dst);
  std::optional<PortId> route_of(Address dst) const { return shards_.front()->route_of(dst); }
  void attach(PortId port, const SocketAddress& peer);
  void detach(PortId port);

 private:
  // Runs fn(shard) on every shard's thread, shard 0's (this one) last; `fn` holds its inputs by
  // value (a shard that does not answer in time runs it later). Throws std::runtime_error naming
  // a shard that did not answer within a second.
  void on_every_shard(const std::function<void(SwitchShard&)>& fn);
  // A port's transmitters, shared by its queues on every shard of `threads` (none with one).
  static SwitchShard::PortLink new_link(std::uint32_t threads);

  SharedInterfaces interfaces_;  // interface ports: what every thread's share
  std::vector<std::unique_ptr<SwitchShard>> shards_;
  std::vector<SwitchShard::PortLink> links_;  // by port
  std::vector<std::thread> threads_;          // shards_[i]'s, while started
};

}  // namespace atp::detail
