// Rina's job plan (plan.h of this folder): the ring of a job's racks and single workers, each
// worker's config and each switch's entry on the workers' paths.
#include "atp/rina/plan.h"

#include <algorithm>
#include <set>
#include <utility>

#include "atp/plan/paths.h"

namespace atp {

JobSpec rina_reformed_job(JobSpec job, std::vector<std::string> left, std::uint16_t values_per_packet,
                          std::span<const Seq> old_ring_seqs) {
  job.workers = std::move(left);
  job.values_per_packet = values_per_packet;
  job.initial_seq = 0;
  for (const Seq s : old_ring_seqs) {
    if (seq_before(job.initial_seq, s)) job.initial_seq = s;
  }
  return job;
}

namespace {

// An aggregating rack's ToR -> the ranks of its member.
using AbstractedRacks = std::map<std::string, std::vector<std::uint32_t>>;

// The ring's members into `plan` (plan.h: each aggregating rack one member, every other worker one
// of its own, ordered by their first worker), and the aggregating racks. Throws PlanError for a
// rack of more workers than a bitmap holds.
AbstractedRacks plan_members(const PortGraph& graph, const JobSpec& job, const std::string& name, RinaJobPlan& plan) {
  // Racks in the order of their first worker; an aggregating one of two or more is one member.
  std::vector<std::pair<std::string, std::vector<std::uint32_t>>> racks;
  for (std::uint32_t r = 0; r < job.workers.size(); ++r) {
    const std::string& tor = graph.tor.at(job.workers[r]);
    const auto rack = std::find_if(racks.begin(), racks.end(), [&](const auto& e) { return e.first == tor; });
    if (rack == racks.end()) {
      racks.push_back({tor, {r}});
    } else {
      rack->second.push_back(r);
    }
  }
  AbstractedRacks abstracted;
  for (auto& [tor, ranks] : racks) {
    if (job.in_network_aggregation && ranks.size() >= 2 && graph.switch_config.at(tor)->atp_capable) {
      if (ranks.size() > kMaxBitmapPositions) {
        throw PlanError(name + " has " + std::to_string(ranks.size()) + " workers under switch " + quote(tor) +
                        "; a rack holds at most " + std::to_string(kMaxBitmapPositions));
      }
      abstracted[tor] = ranks;
      plan.members.push_back(ranks);
    } else {
      for (const std::uint32_t r : ranks) plan.members.push_back({r});
    }
  }
  std::sort(plan.members.begin(), plan.members.end());
  return abstracted;
}

// What the aggregating racks' switches allow: the narrowest aggregator (values) and the smallest
// table (aggregator slots; 0 without such a rack).
struct RackLimits {
  std::uint16_t narrowest = kMaxValuesPerPacket;
  std::uint32_t slots = 0;
};

RackLimits rack_limits(const PortGraph& graph, const AbstractedRacks& abstracted) {
  RackLimits limits;
  for (const auto& [tor, ranks] : abstracted) {
    const SwitchConfig& config = *graph.switch_config.at(tor);
    limits.narrowest = std::min(limits.narrowest, config.aggregator_width);
    limits.slots = limits.slots == 0 ? config.num_aggregators : std::min(limits.slots, config.num_aggregators);
  }
  return limits;
}

// Worker `rank`'s config in the ring `plan` holds.
RinaConfig rina_worker_config(const JobSpec& job, std::uint32_t rank, const std::vector<Address>& addresses,
                              const RinaJobPlan& plan, std::uint32_t slots) {
  RinaConfig c;
  c.job = job.id;
  c.rank = rank;
  c.workers = addresses;
  c.members = plan.members;
  c.values_per_packet = plan.values_per_packet;
  c.scale = job.scale;
  c.aggregator_slots = std::max<std::uint32_t>(slots, 1);
  c.congestion = job.congestion;
  if (c.congestion.max_window == CongestionConfig{}.max_window) {  // the job names none of its own
    c.congestion.max_window = kRinaMaxWindow;
    c.congestion.initial_window = std::min(c.congestion.initial_window, kRinaMaxWindow);
    c.congestion.min_window = std::min(c.congestion.min_window, kRinaMaxWindow);
    c.congestion.initial_ssthresh = std::min(c.congestion.initial_ssthresh, kRinaMaxWindow);
  }
  set_timeouts(job, c);
  return c;
}

// Each switch's entry into `plan`: the job's admitted ports and routes to its workers, and in an
// aggregating rack's ToR the ports of its member's workers.
void plan_switches(const NetworkPlan& network, const PortGraph& graph, const JobSpec& job,
                   const std::vector<Address>& addresses, const AbstractedRacks& abstracted, RinaJobPlan& plan) {
  // Admission on every port a packet between two of the job's workers comes in on: ring
  // neighbours talk, and any worker may ask any other for a sum it missed.
  std::map<std::string, std::set<PortId>> admitted;
  for (const std::string& from : job.workers) {
    for (const std::string& to : job.workers) {
      if (from == to) continue;
      walk_path(network, graph, from, to,
                [&](const std::string& s, PortId ingress, PortId) { admitted[s].insert(ingress); });
    }
  }
  for (const auto& [tor, ranks] : abstracted) admitted[tor];  // a ring of one rack: its ToR still aggregates
  for (const auto& [switch_name, ports] : admitted) {
    SwitchJobPlan& entry = plan.switches[switch_name];
    entry.name = job.name;
    entry.entry.job = job.id;
    entry.entry.admitted_ports.assign(ports.begin(), ports.end());
    const std::map<Address, PortId>& routes = network.routes.at(switch_name);
    for (const Address a : addresses) entry.routes.emplace_back(a, routes.at(a));
    std::sort(entry.routes.begin(), entry.routes.end());
    if (const auto rack = abstracted.find(switch_name); rack != abstracted.end()) {
      for (const std::uint32_t r : rack->second) {
        const PortId port = routes.at(addresses[r]);
        entry.entry.rina_members.push_back(port);
        if (!std::count(entry.entry.admitted_ports.begin(), entry.entry.admitted_ports.end(), port)) {
          entry.entry.admitted_ports.push_back(port);
        }
      }
      std::sort(entry.entry.admitted_ports.begin(), entry.entry.admitted_ports.end());
    }
  }
}

}  // namespace

RinaJobPlan plan_rina_job(const NetworkPlan& network, const JobSpec& job) {
  const PortGraph graph = build_port_graph(network);
  check_job_spec(network, job, false);
  const std::string name = "job " + quote(job.name);
  RinaJobPlan plan;
  const AbstractedRacks abstracted = plan_members(graph, job, name, plan);

  // The racks' switches bound the fragment width and give the aggregator slots.
  const RackLimits limits = rack_limits(graph, abstracted);
  plan.values_per_packet = job_fragment_width(network, job, limits.narrowest);
  if (plan.values_per_packet > limits.narrowest) {
    throw PlanError(name + " uses " + std::to_string(plan.values_per_packet) +
                    " values per packet, wider than a rack switch's aggregators (" + std::to_string(limits.narrowest) +
                    ")");
  }

  std::vector<Address> addresses;
  for (const std::string& w : job.workers) addresses.push_back(network.host_address.at(w));
  for (std::uint32_t r = 0; r < job.workers.size(); ++r) {
    plan.workers.push_back(rina_worker_config(job, r, addresses, plan, limits.slots));
  }
  plan_switches(network, graph, job, addresses, abstracted, plan);
  return plan;
}

}  // namespace atp
