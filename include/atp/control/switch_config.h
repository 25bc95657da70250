// The switch daemon's configuration and its file (YAML): what `atp switch --config` reads and
// what the process runner writes for it, one type and one codec for both sides.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "atp/control/control_auth.h"
#include "atp/io/egress_queue.h"
#include "atp/io/socket_address.h"
#include "atp/switch.h"

namespace atp::control {

// A bad switch config file: what() is one sentence naming the file and the key
// ("switch.yaml: ports[1].rate_gbs: unknown key (expected one of ...)").
class SwitchConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// At most this many ports: PortId is 16 bits.
inline constexpr std::size_t kMaxPorts = std::size_t{1} << 16;

// At most this many dataplane threads (SwitchDaemonConfig::threads).
inline constexpr std::uint32_t kMaxDataplaneThreads = 64;

// One switch port, of one of two kinds (all ports of a switch are of the same kind):
// - a UDP peer (a host process or another switch on loopback): ATP packets in UDP datagrams;
// - a Linux interface (e.g. one end of a veth pair in the switch's network namespace), read and
//   written as whole Ethernet frames: the switch is then an Ethernet switch for every frame and
//   runs the pipeline on the ATP ones (IPv4/UDP to kUdpPort), see docs/testbed.md.
// Each port has its egress queue and optionally an ingress queue.
struct SwitchPortConfig {
  SocketAddress peer;  // UDP ports: datagrams from here arrive on this port; packets out of it go here
  // Rate limit, buffer, ECN threshold and faults of the port's egress; a buffer and threshold
  // unless the file sets them (switch_port_egress; the threshold sized for the file's rate_gbps),
  // which apply once it has a rate.
  EgressConfig egress = switch_port_egress();
  // The peer -> switch direction (the link's other half, which the peer's own process does not
  // model): datagrams (frames) from the peer pass this queue before the pipeline. Absent: straight in.
  std::optional<EgressConfig> ingress;
  std::string interface;  // interface ports: the Linux interface's name; empty on UDP ports
  // Interface ports: the config name of the switch at the link's other end (`switch: NAME`), empty
  // where a host is; how a job's planner finds the links between switches on interfaces
  // (Orchestrator::discover_links), as UDP switches' are found from their ports' peers.
  std::string neighbour;
  bool is_interface() const { return !interface.empty(); }
};

// The overlay addresses a switch gives the hosts that attach at run time (POST /hosts): an IPv4
// prefix inside 10.0.0.0/8 (`host_pool: 10.1.0.0/16`), less its first and last address. The
// switches of one job need pools that do not overlap, as racks have subnets of their own: a job
// whose ranks hang under several switches is planned over all their hosts' addresses.
struct HostPool {
  Address network = 0x0A000000;    // 10.0.0.0, the host bits zero
  std::uint8_t prefix_length = 8;  // 8 to 30
  Address first() const { return network + 1; }
  Address last() const { return network + static_cast<Address>((std::uint64_t{1} << (32 - prefix_length)) - 2); }
  std::string to_string() const;  // "10.1.0.0/16"
};
// Parses "A.B.C.D/N"; nullopt with `why` set (one sentence) for text that is not a pool inside
// 10.0.0.0/8 with 8 <= N <= 30 and its host bits zero.
std::optional<HostPool> parse_host_pool(const std::string& text, std::string& why);

struct SwitchDaemonConfig {
  std::string name = "switch";
  SwitchConfig pipeline;                              // aggregators, width, reclaim timeout, ATP-capable or not
  SocketAddress listen = SocketAddress::loopback(0);  // the data socket of UDP ports (port 0: kernel-chosen)
  std::string control_host = "127.0.0.1";             // HTTP control endpoint
  std::uint16_t control_port = 0;                     // 0: kernel-chosen
  std::vector<SwitchPortConfig> ports;                // port i = ports[i]
  std::vector<std::pair<Address, PortId>> routes;     // overlay dst host -> egress port (plan_network's routes)
  HostPool host_pool;                                 // addresses of hosts attached at run time
  std::uint64_t seed = 0;                             // seeds the port queues' fault draws
  // Dataplane threads, each with a slice of the aggregator table, its own sockets and queues.
  // 0: chosen from the machine, a quarter of its cores, 1 to 4, a divisor of the aggregators.
  // More than one divides num_aggregators.
  std::uint32_t threads = 0;
  AccessConfig access;  // who may use the control plane (control_auth.h); not in the file
  // The most ports, roles and routes all installed jobs may name together (every job's
  // admitted_ports, multicast_ports, roles and routes): what POST /jobs can make the switch hold is bounded by this,
  // not by 65536 job ids times a body's worth each. A job beyond it is refused (507). Not in the file.
  std::size_t max_job_entries = std::size_t{1} << 22;
  // True when the ports are Linux interfaces (then `listen` is not used: there is no UDP socket).
  bool interface_ports() const { return !ports.empty() && ports.front().is_interface(); }
};

// Parses the YAML config (`where` names it in errors, e.g. the file name). Strict: unknown keys,
// wrong types and impossible values throw SwitchConfigError, and so do more than 65536 ports and
// an aggregator table (aggregators x width) larger than the machine's memory.
//   name: s0                 aggregators: 4096        width: 1024
//   reclaim_timeout_us: 100000                        atp_capable: true
//   listen: 127.0.0.1:0      control: 127.0.0.1:0     seed: 1      threads: 0
//   ports: [{peer: 127.0.0.1:9001, rate_gbps: 0, buffer_bytes: 1000000, ecn_threshold_packets: 20,
//            delay_us: 0, loss: 0, duplicate: 0, reorder: 0,
//            ingress: {rate_gbps: 0, ...the same eight keys}}]     (ingress optional)
//   routes: [{dst: 10.0.0.1, port: 0}]
//   host_pool: 10.0.0.0/8
// A port names either `peer: IP:PORT` (a UDP peer) or `interface: NAME` (a Linux interface, e.g.
// `interface: sw0-p1`; needs root or CAP_NET_RAW); all ports of one switch are of one kind, and a
// switch on interfaces has no `listen:` (it has no UDP socket). Without `ports:` the switch is a
// UDP switch whose hosts attach at run time (POST /hosts). Every key is optional (the defaults
// are SwitchDaemonConfig's). reclaim_timeout_us is 0 (never reclaim) to kMaxReclaimTimeoutUs
// (2^40 = 1099511627776 microseconds), fractions to the nanosecond (500 ns: 0.5); seed is 0 to
// 2^64 - 1.
SwitchDaemonConfig parse_switch_config(const std::string& yaml_text, const std::string& where);
// Reads the file with read_config_file (a regular file of at most kMaxConfigFileBytes) and parses
// it; throws SwitchConfigError naming the file.
SwitchDaemonConfig load_switch_config(const std::string& path);

// The config as a file parse_switch_config reads back the same, every key written (listen: only
// for UDP ports), but access and max_job_entries, which are not in the file. reclaim_timeout_us
// and a port's delay_us keep their nanoseconds (io/egress_fields.h): any reclaim timeout from 0
// to kMaxReclaimTimeoutUs microseconds reads back exactly.
std::string to_yaml(const SwitchDaemonConfig& config);

// Throws SwitchConfigError (naming config.name) when `config` asks for what parse_switch_config
// refuses for its size: an aggregator table larger than the machine's memory, or more than
// kMaxPorts ports, or dataplane threads it cannot have. For a config built in C++, not parsed
// (ClusterJob's local switch).
void check_limits(const SwitchDaemonConfig& config);

}  // namespace atp::control
