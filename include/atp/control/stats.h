// The daemons' counters as messages: what a switch's and a PS's GET /stats answer (JSON) and
// GET /metrics (Prometheus text), one type each, written by the daemon and read by every client.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "atp/io/egress_queue.h"
#include "atp/io/socket_address.h"
#include "atp/ps.h"
#include "atp/switch.h"

namespace atp::control {

// Parsing is strict, like the other control messages (control.h): a missing key, a value of the
// wrong type, and a key the reader does not know are each a ControlError naming the field
// ("ports[2].tx_packets: missing"). A daemon and its readers are one build of atp: a key one side
// does not know is a renamed counter, and reading it as 0 would be a silent wrong value. So is a
// job or port listed twice (a switch's "jobs" and "ports" rows, a PS's "jobs" keys, which are
// written std::to_string(id): "01" is refused), refused the same way, naming the id.
//
// Counters count from the daemon's start; gauges (marked so below) are levels at the time of the
// snapshot. operator+= adds the counters of a snapshot to another's (a switch's counters from
// before a restart to its live ones) and leaves the gauges as the left side has them: what a
// table or a queue holds now is not a sum over the past.

// What an interface-port switch does with frames that are not ATP's (all zero on UDP ports).
struct EthernetCounters {
  std::uint64_t atp_frames = 0;        // frames handed to the pipeline
  std::uint64_t non_atp_frames = 0;    // frames switched as plain Ethernet (ARP, TCP, other UDP, IPv6, ...)
  std::uint64_t malformed_frames = 0;  // runts, and frames to ATP's UDP port that are not a valid ATP packet: dropped
  std::uint64_t l2_forwarded = 0;      // non-ATP frames sent to the one port their destination MAC is behind
  std::uint64_t l2_flooded = 0;    // non-ATP frames to broadcast, multicast or unknown MACs: sent to all other ports
  std::uint64_t l2_same_port = 0;  // non-ATP frames whose destination is behind their ingress port: dropped
  std::uint64_t no_neighbor = 0;   // pipeline sends to an IP whose MAC the switch has not learned: dropped
  std::uint64_t neighbor_refused = 0;  // IP -> MAC not learned: the IP's route points to another port
};
// Several threads' counters added up, field by field.
EthernetCounters& operator+=(EthernetCounters& sum, const EthernetCounters& c);

// One dataplane thread of a switch (GET /stats' "threads", by thread). Not in /metrics.
struct SwitchThreadLoad {
  std::uint64_t packets = 0;        // through its pipeline
  std::uint64_t handed_off = 0;     // received for another thread's slice, handed to it
  std::uint64_t handoff_drops = 0;  // the same, refused by that thread's full inbox: dropped
};

// One job a switch knows: installed now, or one that has counted packets since the start.
struct SwitchJobStats {
  JobId job = 0;
  std::string name;        // the job's (SwitchJobPlan::name) while installed; "" after
  bool installed = false;  // gauge (0 or 1 in the document)
  SwitchJobCounters counters;
};

// One port of a switch. The document names the port's egress counters tx_packets, tx_bytes,
// queue_drops, lost, duplicated, reordered, ecn_marked and queue_depth (a gauge), their sum
// drops (queue_drops + lost), and its ingress queue's ingress_lost, ingress_queue_drops,
// ingress_duplicated, ingress_reordered, ingress_ecn_marked and ingress_queue_depth (a gauge).
struct SwitchPortStats {
  PortId port = 0;
  // What the port is, by the switch's kind (SwitchStats::data): a UDP port's peer ("peer"; nullopt,
  // written "", once DELETE /hosts detached it), or an interface port's Linux name ("interface").
  std::optional<SocketAddress> peer;
  std::string interface;
  std::string neighbour;         // an interface port's `switch:` from the config ("switch"; absent where empty)
  std::uint64_t rx_packets = 0;  // packets received from the port, before its ingress queue
  std::uint64_t rx_bytes = 0;
  EgressCounters egress;
  // The ingress queue's (zero where the port has none). Its packets and bytes are not in the
  // document (rx_packets and rx_bytes are): from_json leaves them 0.
  EgressCounters ingress;
  std::uint64_t rx_kernel_drops = 0;  // frames the kernel dropped before the switch read them (interface ports)
};

// A switch's GET /stats. Shape (keys in any order; JSON text has them sorted):
//   {"name": "s0", "data": "127.0.0.1:9000" (UDP ports) or "interfaces": ["veth0", ...],
//    "threads": [{"packets": 3, "handed_off": 0, "handoff_drops": 0}],
//    "switch": {"packets": 3, "malformed": 1, ...every field of `switch` below...},
//    "jobs": [{"job": 1, "installed": 1, "aggregations": 2, ...SwitchJobCounters' fields...}],
//    "ports": [{"port": 0, "peer": "127.0.0.1:40001", "rx_packets": 1, ...}]}
//    (an interface port's row has "interface": "p0" instead of "peer", and "switch": "core" where
//    its config names the switch at the link's other end)
struct SwitchStats {
  std::string name;
  // UDP ports: the data socket's address ("data"). Interface ports: nullopt, and `interfaces`
  // names them by port ("interfaces").
  std::optional<SocketAddress> data;
  std::vector<std::string> interfaces;
  std::vector<SwitchThreadLoad> threads;  // by thread; += keeps the left side's
  // "switch": the pipelines' counters, summed over the threads, and the ports' and dataplane's.
  SwitchCounters pipeline;
  std::uint64_t unknown_source = 0;      // datagrams from an address that is no port's peer: dropped (UDP ports)
  std::uint64_t no_port = 0;             // sends to a port the switch lacks, or to a detached one: dropped
  std::uint64_t truncated = 0;           // datagrams or frames larger than a receive buffer: dropped
  std::uint64_t send_failed = 0;         // released packets the kernel refused: dropped
  std::uint64_t handoff_drops = 0;       // the threads' handoff_drops, summed
  std::uint64_t aggregators = 0;         // gauge: the table's size (0 on a switch that is not ATP-capable)
  std::uint64_t aggregator_width = 0;    // gauge: int32 values per aggregator (0 likewise)
  std::uint64_t aggregators_in_use = 0;  // gauge: aggregators holding a fragment now
  EthernetCounters ethernet;             // interface ports
  std::uint64_t mac_addresses = 0;       // gauge: interface ports' source MACs learned
  std::uint64_t neighbors = 0;           // gauge: interface ports' IPv4 -> MAC entries learned
  std::vector<SwitchJobStats> jobs;      // by job id
  std::vector<SwitchPortStats> ports;    // by port

  // Adds `earlier`'s counters (a snapshot of the same switch before it restarted) to these, and
  // keeps these gauges, name, addresses and threads. Jobs and ports are matched by id; one only
  // `earlier` has is added as a row of its own, not installed (its other gauges as they were),
  // in its place: jobs and ports stay sorted by id.
  SwitchStats& operator+=(const SwitchStats& earlier);
};

// A PS daemon's own counters (the endpoints count their own in atp::PsStats).
struct PsDaemonCounters {
  std::uint64_t datagrams_received = 0;
  std::uint64_t malformed = 0;    // not an ATP packet (decode_header failed): dropped
  std::uint64_t unknown_job = 0;  // valid ATP packet of a job not installed here: dropped
  // Addressed by IP: a gradient whose datagram did not come from the ATP header's src at the ATP
  // port (forged, or from a process other than the worker): dropped.
  std::uint64_t foreign_source = 0;
  std::uint64_t datagrams_sent = 0;
  std::uint64_t send_failures = 0;  // packets the kernel refused (full send buffer or an error): lost
  // Addressed by IP: parameter packets for a worker on this host (another PS's answer to that
  // worker's resend, sent to the host's address, which this socket's more specific bind
  // receives), handed on to 127.0.0.1 where the worker's 0.0.0.0 socket gets them.
  std::uint64_t relayed_to_local_worker = 0;
};

// A PS's GET /stats. Shape:
//   {"data": "127.0.0.1:9001", "uplink": "127.0.0.1:9000" ("" when it has none),
//    "daemon": {"datagrams_received": 4, ...PsDaemonCounters' fields...},
//    "jobs": {"1": {"packets_received": 4, ...atp::PsStats' fields...}}}
struct PsStats {
  SocketAddress data;  // where jobs' workers reach it: what a job planner attaches to the PS's switch
  // The switch's data address it sends to and only hears from (`--uplink`): which of several
  // switches a job planner attaches it to. nullopt: it answers whoever sent.
  std::optional<SocketAddress> uplink;
  PsDaemonCounters daemon;
  std::map<JobId, atp::PsStats> jobs;      // the installed jobs
  std::map<JobId, std::string> job_names;  // their names (PsConfig::name), "" for none
};

// JSON text, indented for people (`atp switch stats`), without a final newline.
std::string to_json(const SwitchStats& stats);
std::string to_json(const PsStats& stats);
SwitchStats switch_stats_from_json(const std::string& text);  // throws ControlError
PsStats ps_stats_from_json(const std::string& text);          // throws ControlError

// Prometheus text exposition. A switch's: one metric family per counter of "switch", "jobs" and
// "ports" (atp_switch_<key>_total, atp_switch_job_<key>_total, atp_switch_port_<key>_total; a
// gauge without _total), labelled by switch, and by job or port; families in key order. A PS's:
// its daemon counters with their help, atp_ps_jobs (a gauge) and atp_ps_job_<key>_total by job.
// Label values are escaped as the text format says (\\, \" and \n for a backslash, a double
// quote and a line feed).
std::string to_prometheus(const SwitchStats& stats);
std::string to_prometheus(const PsStats& stats);

}  // namespace atp::control
