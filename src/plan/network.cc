// The network plan (plan.h): validates a topology, numbers addresses and ports and computes
// shortest-path routes; and what plans of every algorithm share about names and fragment widths.
#include <algorithm>
#include <cstddef>
#include <numeric>
#include <optional>
#include <set>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "atp/plan/paths.h"
#include "atp/values_per_packet.h"

namespace atp {
namespace {

// Checks names and attachments; returns switch name -> index in topology.switches.
std::unordered_map<std::string, std::size_t> index_switches(const Topology& topology) {
  if (topology.switches.empty()) throw PlanError("the topology has no switches; every host needs a ToR switch");
  std::unordered_map<std::string, std::size_t> switch_index;
  std::unordered_set<std::string> names;
  for (std::size_t i = 0; i < topology.switches.size(); ++i) {
    const SwitchSpec& s = topology.switches[i];
    if (s.name.empty()) throw PlanError("switch #" + std::to_string(i) + " has an empty name");
    if (!names.insert(s.name).second) {
      throw PlanError("the topology names two switches " + quote(s.name) + "; node names must be unique");
    }
    if (s.config.atp_capable && (s.config.num_aggregators == 0 || s.config.aggregator_width == 0)) {
      throw PlanError(
          "switch " + quote(s.name) +
          " is ATP-capable but has no aggregators (num_aggregators and aggregator_width must be at least 1)");
    }
    switch_index.emplace(s.name, i);
  }
  for (std::size_t i = 0; i < topology.hosts.size(); ++i) {
    const HostSpec& h = topology.hosts[i];
    if (h.name.empty()) throw PlanError("host #" + std::to_string(i) + " has an empty name");
    if (!names.insert(h.name).second) {
      throw PlanError("the topology names two nodes " + quote(h.name) + "; switch and host names must be unique");
    }
    if (!switch_index.contains(h.switch_name)) {
      throw PlanError("host " + quote(h.name) + " is attached to " + quote(h.switch_name) +
                      ", which is not a switch in the topology");
    }
  }
  return switch_index;
}

// Smallest-index representative of a's component (union-find without ranks: topologies are small).
std::size_t find_root(std::vector<std::size_t>& parent, std::size_t a) {
  while (parent[a] != a) {
    parent[a] = parent[parent[a]];
    a = parent[a];
  }
  return a;
}

// Rejects links to unknown switches, self-links, duplicates and a disconnected graph. Cycles are
// fine (fat-trees, dragonflies): routes are shortest paths (plan_network).
void check_switch_graph(const Topology& topology, const std::unordered_map<std::string, std::size_t>& switch_index) {
  std::vector<std::size_t> parent(topology.switches.size());
  std::iota(parent.begin(), parent.end(), std::size_t{0});
  std::set<std::pair<std::size_t, std::size_t>> seen;
  for (const SwitchLink& l : topology.switch_links) {
    const std::string &a = l.a, &b = l.b;
    const std::string link = quote(a) + "-" + quote(b);
    for (const std::string* end : {&a, &b}) {
      if (!switch_index.contains(*end)) {
        throw PlanError("switch link " + link + " names " + quote(*end) + ", which is not a switch in the topology");
      }
    }
    const std::size_t ia = switch_index.at(a), ib = switch_index.at(b);
    if (ia == ib) throw PlanError("switch link " + link + " connects a switch to itself");
    if (!seen.insert({std::min(ia, ib), std::max(ia, ib)}).second) {
      throw PlanError("switch link " + link + " is listed twice");
    }
    const std::size_t ra = find_root(parent, ia), rb = find_root(parent, ib);
    parent[std::max(ra, rb)] = std::min(ra, rb);
  }
  for (std::size_t i = 1; i < topology.switches.size(); ++i) {
    if (find_root(parent, i) != find_root(parent, 0)) {
      throw PlanError("switch " + quote(topology.switches[i].name) + " is not connected to switch " +
                      quote(topology.switches[0].name) + "; switch-to-switch links must connect every switch");
    }
  }
}

using SwitchIndex = std::unordered_map<std::string, std::size_t>;

// Numbers each switch's ports: those the topology names are kept as named, the others come
// after the highest so far, in the order they are asked for.
class PortNumbers {
 public:
  explicit PortNumbers(const Topology& topology) : topology_(topology), next_(topology.switches.size(), 0) {}

  PortId take(std::size_t s) {
    if (next_[s] > std::numeric_limits<PortId>::max()) {
      throw PlanError("switch " + quote(topology_.switches[s].name) + " needs more than 65536 ports");
    }
    return static_cast<PortId>(next_[s]++);
  }

  // `what` (a link or host, for the error) has `port` of switch `s`.
  void keep(std::size_t s, PortId port, const std::string& what) {
    if (const auto [at, fresh] = taken_.emplace(std::pair{s, port}, what); !fresh) {
      throw PlanError(what + " and " + at->second + " both have port " + std::to_string(port) + " of switch " +
                      quote(topology_.switches[s].name));
    }
    next_[s] = std::max<std::uint32_t>(next_[s], std::uint32_t{port} + 1);
  }

  std::uint16_t count(std::size_t s) const { return static_cast<std::uint16_t>(next_[s]); }

 private:
  const Topology& topology_;
  std::vector<std::uint32_t> next_;                              // ports handed out so far per switch
  std::map<std::pair<std::size_t, PortId>, std::string> taken_;  // (switch, port) -> what has it, of those named
};

// The hosts' addresses and their ToR ports, in host order, unless they are attached to a running
// switch already (then they keep its address and port). Returns each host's port on its ToR.
std::vector<PortId> attach_hosts(const Topology& topology, const SwitchIndex& switch_index, PortNumbers& ports,
                                 NetworkPlan& plan) {
  const bool attached = !topology.hosts.empty() && topology.hosts.front().attached.has_value();
  std::vector<PortId> host_port(topology.hosts.size());
  for (std::size_t h = 0; h < topology.hosts.size(); ++h) {
    const HostSpec& host = topology.hosts[h];
    if (host.attached.has_value() != attached) {
      throw PlanError("host " + quote(host.name) + (attached ? " has no" : " has an") +
                      " attachment (address and port); either every host has one or none does");
    }
    const std::size_t tor = switch_index.at(host.switch_name);
    const Address address = attached ? host.attached->address : kFirstHostAddress + static_cast<Address>(h);
    if (const auto taken_by = plan.host_by_address.emplace(address, host.name); !taken_by.second) {
      const std::string& other =
          taken_by.first->second;  // not a structured binding: clang 14 refuses a lambda naming one
      const std::string& other_tor = std::find_if(topology.hosts.begin(), topology.hosts.end(), [&](const HostSpec& o) {
                                       return o.name == other;
                                     })->switch_name;
      throw PlanError(
          "hosts " + quote(other) + " and " + quote(host.name) + " have the same address " + format_address(address) +
          (other_tor == host.switch_name ? std::string()
                                         : "; switches " + quote(other_tor) + " and " + quote(host.switch_name) +
                                               " give hosts addresses from one pool: give each its own host_pool"));
    }
    plan.host_address[host.name] = address;
    if (attached) {
      host_port[h] = host.attached->port;
      ports.keep(tor, host_port[h], "host " + quote(host.name));
    } else {
      host_port[h] = ports.take(tor);
    }
    plan.links.push_back(PlannedLink{PortRef{host.name, 0}, PortRef{host.switch_name, host_port[h]}});
  }
  return host_port;
}

// adjacency[s]: (neighbour switch, local port), in the order of the topology's links.
using Adjacency = std::vector<std::vector<std::pair<std::size_t, PortId>>>;

// Routes: a breadth-first search from every switch gives the first hop of a shortest path
// towards every other switch; a host is reached through its ToR (or directly from its ToR).
// Ties go to the neighbour found first: neighbours are searched in the order of their links in
// the topology. Each hop of a route is a shortest path's, so the distance to the destination
// falls at every hop: no loops, and the routes of every switch towards one host form a tree
// (ATP's aggregation tree towards a PS is the one towards the PS's address).
void plan_routes(const Topology& topology, const SwitchIndex& switch_index, const Adjacency& adjacency,
                 const std::vector<PortId>& host_port, NetworkPlan& plan) {
  const std::size_t n_switches = topology.switches.size();
  std::vector<PortId> first_hop(n_switches);
  std::vector<bool> reached(n_switches);
  std::vector<std::size_t> frontier;
  for (std::size_t s = 0; s < n_switches; ++s) {
    std::fill(reached.begin(), reached.end(), false);
    reached[s] = true;
    frontier.clear();
    for (const auto& [next, port] : adjacency[s]) {
      reached[next] = true;
      first_hop[next] = port;
      frontier.push_back(next);
    }
    for (std::size_t i = 0; i < frontier.size(); ++i) {
      const std::size_t at = frontier[i];
      for (const auto& [next, port] : adjacency[at]) {
        if (reached[next]) continue;
        reached[next] = true;
        first_hop[next] = first_hop[at];
        frontier.push_back(next);
      }
    }
    auto& routes = plan.routes[topology.switches[s].name];
    for (std::size_t h = 0; h < topology.hosts.size(); ++h) {
      const std::size_t tor = switch_index.at(topology.hosts[h].switch_name);
      routes[plan.host_address.at(topology.hosts[h].name)] = tor == s ? host_port[h] : first_hop[tor];
    }
  }
}

}  // namespace

NetworkPlan plan_network(const Topology& topology) {
  const SwitchIndex switch_index = index_switches(topology);
  check_switch_graph(topology, switch_index);
  if (topology.hosts.size() > std::size_t{kLastHostAddress - kFirstHostAddress + 1}) {
    throw PlanError("the topology has " + std::to_string(topology.hosts.size()) +
                    " hosts, more than the 10.0.0.0/8 address range holds");
  }

  NetworkPlan plan;
  plan.topology = &topology;
  // The ports switch links name first, then the hosts' (attached hosts keep theirs), then the
  // other switch links', in link order.
  PortNumbers ports(topology);
  for (const SwitchLink& l : topology.switch_links) {
    if (!l.ports) continue;
    const std::string what = "switch link " + quote(l.a) + "-" + quote(l.b);
    ports.keep(switch_index.at(l.a), l.ports->first, what);
    ports.keep(switch_index.at(l.b), l.ports->second, what);
  }
  const std::vector<PortId> host_port = attach_hosts(topology, switch_index, ports, plan);
  Adjacency adjacency(topology.switches.size());
  for (const SwitchLink& l : topology.switch_links) {
    const std::size_t ia = switch_index.at(l.a), ib = switch_index.at(l.b);
    const PortId pa = l.ports ? l.ports->first : ports.take(ia);
    const PortId pb = l.ports ? l.ports->second : ports.take(ib);
    adjacency[ia].push_back({ib, pa});
    adjacency[ib].push_back({ia, pb});
    plan.links.push_back(PlannedLink{PortRef{l.a, pa}, PortRef{l.b, pb}});
  }
  for (std::size_t s = 0; s < topology.switches.size(); ++s) {
    plan.switch_port_count[topology.switches[s].name] = ports.count(s);
  }
  plan_routes(topology, switch_index, adjacency, host_port, plan);
  return plan;
}

std::uint16_t fragment_width(std::uint32_t mtu_bytes, std::uint16_t narrowest_aggregator) {
  std::uint32_t width = std::min(kWidestChosenFragment, narrowest_aggregator);
  if (mtu_bytes == 0) {
    width = std::min<std::uint32_t>(width, kFragmentWithoutMtu);
  } else {
    if (mtu_bytes < kIpUdpBytes + packet_size(1)) {
      throw PlanError("an MTU of " + std::to_string(mtu_bytes) + " bytes leaves no room for even one value after the " +
                      std::to_string(kIpUdpBytes + kHeaderBytes) + " bytes of IPv4, UDP and ATP headers");
    }
    width = std::min<std::uint32_t>(width, static_cast<std::uint32_t>((mtu_bytes - kIpUdpBytes - kHeaderBytes) / 4));
  }
  return static_cast<std::uint16_t>(std::max<std::uint32_t>(width, 1));
}

bool label_text(std::string_view text) {
  return text.size() <= 255 &&
         std::all_of(text.begin(), text.end(), [](char c) { return c >= ' ' && c < 0x7F && c != '"' && c != '\\'; });
}

std::optional<std::string> job_name_error(std::string_view name) {
  if (label_text(name)) return std::nullopt;
  return "'" + std::string(name.substr(0, 64)) + (name.size() > 64 ? "...'" : "'") +
         " is not a job name (at most 255 printable ASCII characters, no quotes or backslashes)";
}

std::vector<std::string> route_switches(const NetworkPlan& network, const std::string& from, const std::string& to) {
  const PortGraph graph = build_port_graph(network);
  for (const std::string* host : {&from, &to}) {
    if (!network.host_address.contains(*host)) throw PlanError("no host " + quote(*host) + " in the network");
  }
  std::vector<std::string> switches;
  walk_path(network, graph, from, to, [&](const std::string& s, PortId, PortId) { switches.push_back(s); });
  return switches;
}

}  // namespace atp
