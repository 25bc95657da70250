// Where the process backends' processes run and how they reach each other: everything that
// differs between `atp run --backend loopback` (every process on 127.0.0.1, each switch port a
// UDP peer) and `--backend netns` (a network namespace per node joined by veth links, switches
// on the interfaces, hosts addressing each other by IP). The run itself (run_processes.cc) is
// written once against this interface.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "atp/io/egress_queue.h"
#include "atp/io/socket_address.h"
#include "atp/io/udp_socket.h"
#include "atp/plan/plan.h"
#include "atp/scenario/scenario.h"
#include "worker_process.h"

namespace atp {

struct PsProcessOptions;

// The settings of the link direction from -> to at time t: the defaults, then every fault active
// at t. Real processes have their own latency, so the default propagation delay is not added; a
// fault's delay_us is.
EgressConfig direction_settings(const Scenario& s, const std::string& from, const std::string& to, Duration t);

class Placement {
 public:
  virtual ~Placement() = default;

  virtual std::string_view backend() const = 0;  // "loopback", "netns"
  // The prefix of the run's temporary directory (and of what a SIGKILLed run left to remove).
  virtual std::string temp_prefix() const = 0;
  // The IP MTU of the links the jobs' packets cross (NetworkPlan::mtu_bytes): the scenario's on
  // the testbed, whose links it sets up; loopback's own.
  virtual std::uint32_t mtu(const Scenario& scenario) const = 0;

  // Sets up the network of `network` (a plan of `scenario`'s topology, which both outlive the
  // placement) before any process starts, the hosts' own links at their settings of time 0.
  virtual void prepare(const Scenario& scenario, const NetworkPlan& network) = 0;

  // The network namespace a node's processes run in (a path), "" for this one.
  virtual std::string namespace_of(const std::string& node) const = 0;

  // A switch's data socket address (UDP ports), or nullopt (interface ports: it has no socket).
  virtual std::optional<SocketAddress> switch_listen(const std::string& name) const = 0;
  // What a switch port is, in its config: the peer's UDP address, or the interface's name.
  struct PortEndpoint {
    std::optional<SocketAddress> peer;
    std::string interface;
  };
  virtual PortEndpoint port_endpoint(PortId port, const std::string& peer) const = 0;
  // The host -> switch direction as the switch's ingress queue applies it, from the direction's
  // settings: netns paces it at the host's own NIC, so the queue only adds the faults.
  virtual EgressConfig host_ingress(EgressConfig direction) const = 0;

  virtual PsProcessOptions ps_options(const std::string& host) const = 0;
  // Where an ATP worker on `host` binds and sends to (WorkerSpec::local and ::uplink).
  virtual void place_worker(const std::string& host, worker_process::WorkerSpec& spec) const = 0;
  // The TCP addresses of a host collective's ranks (ring, Gloo), one per worker host.
  virtual std::vector<SocketAddress> tcp_ranks(const std::vector<std::string>& hosts) = 0;

  // Scenario noise: the socket a noise host's packets leave from (nullptr once the host crashed),
  // and where they go.
  UdpSocket* noise_socket(const std::string& host);
  void drop_noise_socket(const std::string& host) { noise_sockets_.erase(host); }
  virtual SocketAddress noise_destination(const std::string& host) const = 0;

  // The hosts' links (host -> switch direction) as of time `t`, where the host's NIC paces them.
  virtual void set_host_rates(Duration t) { (void)t; }
  // Adds what the hosts' own network stacks dropped (which no switch sees) to `result`.
  virtual void add_host_drops(ScenarioResult& result) const { (void)result; }

 protected:
  std::map<std::string, UdpSocket> noise_sockets_;  // noise host -> its socket
};

std::unique_ptr<Placement> loopback_placement();
std::unique_ptr<Placement> namespace_placement();

}  // namespace atp
