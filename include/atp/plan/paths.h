// The pieces every algorithm's job plan is built from (ATP's plan_job here, Rina's in src/rina/):
// the planned network as a graph of ports, the switches on the path between two hosts, the checks
// a job spec passes, its fragment width and its timeouts. Standard library only.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "atp/plan/plan.h"

namespace atp {

// Header::bitmap is 32 bits: at most 32 children per aggregating switch (and workers per Rina rack).
inline constexpr std::size_t kMaxBitmapPositions = 32;

// 'name', for messages.
inline std::string quote(std::string_view name) { return "'" + std::string(name) + "'"; }

// The planned network as a graph: for every node, the peer at the other end of each port.
struct PortGraph {
  std::map<std::string, std::vector<PortRef>> peer;  // node -> port -> (peer node, peer port)
  std::map<std::string, const SwitchConfig*> switch_config;
  std::map<std::string, std::string> tor;  // host -> its switch
};

// The graph of `network`'s links. Throws PlanError for a plan without its topology.
PortGraph build_port_graph(const NetworkPlan& network);

// Calls visit(switch, ingress port, egress port) for every switch on the route from host
// `from` to host `to`, in path order.
template <typename Visit>
void walk_path(const NetworkPlan& network, const PortGraph& g, const std::string& from, const std::string& to,
               Visit&& visit) {
  const Address dst = network.host_address.at(to);
  PortRef at = g.peer.at(from).at(0);  // the host's only port leads to its ToR
  // A shortest path visits each switch at most once; more steps means the routes are inconsistent.
  for (std::size_t step = 0; step <= g.switch_config.size(); ++step) {
    const auto routes = network.routes.find(at.node);
    if (routes == network.routes.end() || !routes->second.contains(dst)) break;
    const PortId egress = routes->second.at(dst);
    visit(at.node, at.port, egress);
    const PortRef next = g.peer.at(at.node).at(egress);
    if (next.node == to) return;
    at = next;
  }
  throw PlanError("the network plan has no loop-free route from host " + quote(from) + " to host " + quote(to));
}

// Throws PlanError naming what is wrong with `job` on `network`: its name, no worker or (with
// `needs_ps`: ATP's protocol; Rina's ignores the PS list) no PS, a host that is not in the
// topology or listed twice, a PS that is also a worker of an aggregated job, a bad fragment width,
// window, table share or scale.
void check_job_spec(const NetworkPlan& network, const JobSpec& job, bool needs_ps = true);

// A job's fragment width: its own, or the widest its `narrowest` aggregating switch and the links'
// MTU take (fragment_width). PlanError, naming the job, when its own does not fit the MTU.
std::uint16_t job_fragment_width(const NetworkPlan& network, const JobSpec& job, std::uint16_t narrowest);

// A job's timeouts and first seq in a worker's config (ATP's WorkerConfig, Rina's RinaConfig).
// JobSpec has no RTO bounds of its own: the config's defaults stay unless its first RTO is
// outside them.
template <class Config>
void set_timeouts(const JobSpec& job, Config& c) {
  c.retransmit_timeout = job.retransmit_timeout;
  c.min_retransmit_timeout = std::min(c.min_retransmit_timeout, job.retransmit_timeout);
  c.max_retransmit_timeout = std::max(c.max_retransmit_timeout, job.retransmit_timeout);
  c.progress_timeout = job.progress_timeout;
  c.initial_seq = job.initial_seq;
}

}  // namespace atp
