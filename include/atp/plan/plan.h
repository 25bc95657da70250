// Job setup (paper §3.2, §3.4): from a topology and a job, compute addresses, switch ports and
// routes, the job's aggregation tree towards each PS (each worker's node in it, the PS's view of
// it) and each switch's admission, multicast and aggregation entries. Impossible jobs raise PlanError.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "atp/aggregator_index.h"
#include "atp/congestion.h"
#include "atp/ps.h"
#include "atp/switch.h"
#include "atp/worker.h"

namespace atp {

// A bad topology or job: what() is one sentence naming the element and what is wrong.
class PlanError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct SwitchSpec {
  std::string name;
  SwitchConfig config;
};
// Overlay host addresses stay inside 10.0.0.0/8: plan_network numbers hosts from the first, and a
// switch daemon gives hosts attached at run time (POST /hosts) the lowest of its host_pool it does
// not route yet.
inline constexpr Address kFirstHostAddress = 0x0A000001;  // 10.0.0.1
inline constexpr Address kLastHostAddress = 0x0AFFFFFE;   // 10.255.255.254

// A host already plugged into a running switch (the switch daemon's POST /hosts): the overlay
// address and the switch port that switch gave it, which a plan must keep.
struct HostAttachment {
  Address address = 0;
  PortId port = 0;  // on the host's ToR
};

struct HostSpec {
  std::string name;
  std::string switch_name;  // the host's ToR: every host has one link, to this switch
  // Unset: plan_network numbers the host (10.0.0.1, ... in host order; ToR ports in host order).
  // Either every host of a topology has one or none does.
  std::optional<HostAttachment> attached = std::nullopt;
};
// A link between two switches. Without ports, plan_network numbers them (after the hosts'); with
// ports, the link is one between running switches (their configured peers, found by
// Orchestrator::discover_links), and the plan keeps them.
struct SwitchLink {
  std::string a, b;
  std::optional<std::pair<PortId, PortId>> ports = std::nullopt;  // on a, on b
};
struct Topology {
  std::vector<SwitchSpec> switches;
  std::vector<HostSpec> hosts;
  std::vector<SwitchLink> switch_links;  // must connect every switch; cycles are fine (shortest-path routes)
};

// One end of a link in the planned network.
struct PortRef {
  std::string node;  // switch or host name
  PortId port = 0;   // hosts have only port 0
};
struct PlannedLink {
  PortRef a, b;  // host links: a = the host (port 0), b = its ToR; switch links: as listed in the topology
};

// Addresses, ports and unicast routes: independent of jobs.
struct NetworkPlan {
  std::map<std::string, Address> host_address;  // 10.0.0.1, 10.0.0.2, ... in host order
  std::map<Address, std::string> host_by_address;
  // Ports of a switch are 0..count-1: its hosts (host order), then its switch links (link order);
  // ports a host attachment or a link names are kept, the others numbered after the highest.
  std::map<std::string, std::uint16_t> switch_port_count;
  std::vector<PlannedLink> links;                           // host links first, then switch links
  std::map<std::string, std::map<Address, PortId>> routes;  // switch -> dst host -> egress port
  const Topology* topology = nullptr;  // the planned topology; plan_job reads it, so it must outlive the plan
  // The IP MTU of the links the job's packets cross (an IP header and what it carries), which
  // plan_network cannot know: the backend that runs the plan sets it (a veth's MTU, the path MTU
  // the kernel reports, a simulator's). 0: no limit. plan_job sizes fragments to fit.
  std::uint32_t mtu_bytes = 0;
};

NetworkPlan plan_network(const Topology& topology);
// The plan keeps a pointer to its topology (NetworkPlan::topology): one of a temporary would dangle.
NetworkPlan plan_network(Topology&& topology) = delete;

// One of `count` equal, fixed shares of the aggregator tables: SwitchML-style static
// allocation, the baseline of the paper's Fig. 13a/14. With n the smallest table of any
// ATP-capable switch in the topology, share k of K is [k * c, k * c + c) with c = floor(n / K):
// disjoint on every switch (the last n mod K aggregators, and what larger tables have beyond n,
// are nobody's).
struct AggregatorShare {
  std::uint32_t index = 0;  // which share, 0..count-1
  std::uint32_t count = 1;  // shares the tables are cut into (a scenario: its jobs with algorithm atp)
};

struct JobSpec {
  std::string name;
  JobId id = 0;
  std::vector<std::string> workers;  // host names; the order gives worker ids
  std::vector<std::string> ps;       // host names; fragments are sharded round-robin over them
  // 0: the widest fragment the job's path takes (plan_job: fragment_width). The paper's Tofino
  // holds kDefaultValuesPerPacket (62); a software switch costs about the same per packet
  // whatever its size, so wider fragments move more values for the same work.
  std::uint16_t values_per_packet = 0;
  double scale = 1e8;  // a fragment position's first scale, rounded down to a power of two (WorkerConfig::scale)
  IndexPolicy index_policy = IndexPolicy::kAllocated;  // with aggregator_share: kLinear (SwitchML's slots)
  CongestionConfig congestion;
  LossRecovery loss_recovery = LossRecovery::kAtp;
  Duration retransmit_timeout = WorkerConfig{}.retransmit_timeout;  // the RTO before one is measured
  Duration progress_timeout = std::chrono::seconds(2);
  Seq initial_seq = 0;
  // false: no switch aggregates this job (its switches only admit and forward its packets and
  // multicast its results), so every worker packet reaches the PS: the parameter-server
  // baseline on the same hosts, protocol and switches.
  bool in_network_aggregation = true;
  // Unset: dynamic sharing (ATP's design), the job's indices span the whole smallest table on
  // its paths and collide with other jobs' at random. Set: the job only ever uses its share.
  std::optional<AggregatorShare> aggregator_share;
  // The jobs sharing the table dynamically: those whose indices span the same tables, this one
  // included, and this job's place among them (0..sharing_jobs-1); part = num_aggregators /
  // sharing_jobs of the smallest table (docs/protocol.md, "Sharing the table"). With index
  // allocated (the default) the job's window starts at its part and may grow to the whole table.
  // With hashed_slots its fragments in flight, and so its slots, stop at its part, and its slots
  // start at sharing_index x part: the jobs planned together start on aggregators of their own,
  // and any may still use the whole table; a job planned alone (sharing_jobs 1) starts at
  // HASH(job).
  std::uint32_t sharing_jobs = 1;
  std::uint32_t sharing_index = 0;
};

struct SwitchJobPlan {
  std::string name;  // the job's (JobSpec::name), for the switch's log and metrics
  SwitchJobEntry entry;
  std::vector<PortId> multicast_ports;  // group multicast_group_address(job) at this switch
  // Destination -> egress port at this switch, for each of the job's hosts (by address): a
  // switch that does not route one yet (a host under another running switch) routes it while the
  // job is installed.
  std::vector<std::pair<Address, PortId>> routes;
};

struct JobPlan {
  std::uint16_t values_per_packet = 0;            // JobSpec's, or the width fragment_width chose
  std::vector<WorkerConfig> workers;              // same order as JobSpec::workers
  std::vector<PsConfig> ps;                       // same order as JobSpec::ps
  std::map<std::string, SwitchJobPlan> switches;  // every switch on the job's paths
  std::uint32_t num_aggregators = 1;              // smallest table among the job's aggregating switches (1: none)
  AggregatorRange aggregators;  // the indices its workers and PSes use: {0, num_aggregators} or its static share
};

// The widest fragment chosen for a job that does not set one: the default aggregator width, so
// that a job no switch aggregates (the PS baseline) moves the same packets as one they do.
inline constexpr std::uint16_t kWidestChosenFragment = SwitchConfig{}.aggregator_width;
// The widest fragment chosen on a network that states no MTU (the in-process one): 4 KiB of
// values, which a jumbo frame carries.
inline constexpr std::uint16_t kFragmentWithoutMtu = 1024;

// The width of a job's fragments when JobSpec::values_per_packet is 0: the largest that every
// switch aggregating it accepts (its aggregator_width), that fits one IP packet of `mtu_bytes`
// (IPv4 + UDP + ATP headers + the values; 0: no MTU known, then at most kFragmentWithoutMtu) and
// at most kWidestChosenFragment. Throws PlanError when not even one value fits the MTU.
std::uint16_t fragment_width(std::uint32_t mtu_bytes, std::uint16_t narrowest_aggregator);

// Whether `text` can label the daemons' metrics and log lines as it is: at most 255 printable
// ASCII characters, without quotes or backslashes (job and switch names).
bool label_text(std::string_view text);

// Why `name` cannot name a job (label_text), or nullopt.
std::optional<std::string> job_name_error(std::string_view name);

// Throws PlanError (e.g. an unknown host, more than 32 workers of a job under one ToR, a
// fragment wider than an aggregating switch's aggregators, a static share of no aggregators).
JobPlan plan_job(const NetworkPlan& network, const JobSpec& job);

// The switches a packet from host `from` to host `to` crosses, in order, as the network's routes
// take it. Throws PlanError for an unknown host or routes that do not lead there.
std::vector<std::string> route_switches(const NetworkPlan& network, const std::string& from, const std::string& to);

}  // namespace atp
