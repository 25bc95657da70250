// Job setup (paper §3.2, §3.4; docs/protocol.md "Aggregation tree"): validates a topology and a
// job, numbers addresses and ports, computes shortest-path routes, aggregation trees and switch entries.
#include "atp/plan/plan.h"

#include <algorithm>
#include <cstddef>
#include <functional>
#include <limits>
#include <numeric>
#include <optional>
#include <set>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "atp/values_per_packet.h"

namespace atp {
namespace {

// Header::bitmap is 32 bits: at most 32 children per aggregating switch (and workers per Rina rack).
constexpr std::size_t kMaxBitmapPositions = 32;

std::string quoted(std::string_view name) { return "'" + std::string(name) + "'"; }

// ---------------------------------------------------------------------------------------------
// plan_network helpers

// Checks names and attachments; returns switch name -> index in topology.switches.
std::unordered_map<std::string, std::size_t> index_switches(const Topology& topology) {
  if (topology.switches.empty()) throw PlanError("the topology has no switches; every host needs a ToR switch");
  std::unordered_map<std::string, std::size_t> switch_index;
  std::unordered_set<std::string> names;
  for (std::size_t i = 0; i < topology.switches.size(); ++i) {
    const SwitchSpec& s = topology.switches[i];
    if (s.name.empty()) throw PlanError("switch #" + std::to_string(i) + " has an empty name");
    if (!names.insert(s.name).second) {
      throw PlanError("the topology names two switches " + quoted(s.name) + "; node names must be unique");
    }
    if (s.config.atp_capable && (s.config.num_aggregators == 0 || s.config.aggregator_width == 0)) {
      throw PlanError(
          "switch " + quoted(s.name) +
          " is ATP-capable but has no aggregators (num_aggregators and aggregator_width must be at least 1)");
    }
    switch_index.emplace(s.name, i);
  }
  for (std::size_t i = 0; i < topology.hosts.size(); ++i) {
    const HostSpec& h = topology.hosts[i];
    if (h.name.empty()) throw PlanError("host #" + std::to_string(i) + " has an empty name");
    if (!names.insert(h.name).second) {
      throw PlanError("the topology names two nodes " + quoted(h.name) + "; switch and host names must be unique");
    }
    if (!switch_index.contains(h.switch_name)) {
      throw PlanError("host " + quoted(h.name) + " is attached to " + quoted(h.switch_name) +
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
    const std::string link = quoted(a) + "-" + quoted(b);
    for (const std::string* end : {&a, &b}) {
      if (!switch_index.contains(*end)) {
        throw PlanError("switch link " + link + " names " + quoted(*end) + ", which is not a switch in the topology");
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
      throw PlanError("switch " + quoted(topology.switches[i].name) + " is not connected to switch " +
                      quoted(topology.switches[0].name) + "; switch-to-switch links must connect every switch");
    }
  }
}

// ---------------------------------------------------------------------------------------------
// plan_job helpers

// The planned network as a graph: for every node, the peer at the other end of each port.
struct PortGraph {
  std::map<std::string, std::vector<PortRef>> peer;  // node -> port -> (peer node, peer port)
  std::map<std::string, const SwitchConfig*> switch_config;
  std::map<std::string, std::string> tor;  // host -> its switch
};

PortGraph build_port_graph(const NetworkPlan& network) {
  if (network.topology == nullptr) throw PlanError("the network plan has no topology; build it with plan_network()");
  PortGraph g;
  for (const SwitchSpec& s : network.topology->switches) g.switch_config[s.name] = &s.config;
  for (const HostSpec& h : network.topology->hosts) g.tor[h.name] = h.switch_name;
  for (const PlannedLink& link : network.links) {
    for (const auto& [from, to] : {std::pair{link.a, link.b}, std::pair{link.b, link.a}}) {
      auto& ports = g.peer[from.node];
      if (ports.size() <= from.port) ports.resize(std::size_t{from.port} + 1);
      ports[from.port] = to;
    }
  }
  return g;
}

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
  throw PlanError("the network plan has no loop-free route from host " + quoted(from) + " to host " + quoted(to));
}

// `needs_ps`: ATP's protocol; Rina's ignores the PS list.
void check_job_spec(const NetworkPlan& network, const JobSpec& job, bool needs_ps = true) {
  if (const std::optional<std::string> bad = job_name_error(job.name)) throw PlanError("job name " + *bad);
  const std::string name = "job " + quoted(job.name);
  if (job.workers.empty()) throw PlanError(name + " has no workers");
  if (job.ps.empty() && needs_ps) throw PlanError(name + " has no parameter server");
  std::unordered_set<std::string> workers, servers;
  for (const std::string& w : job.workers) {
    if (!network.host_address.contains(w)) {
      throw PlanError(name + " names worker " + quoted(w) + ", which is not a host in the topology");
    }
    if (!workers.insert(w).second) throw PlanError(name + " lists worker " + quoted(w) + " twice");
  }
  for (const std::string& p : needs_ps ? job.ps : std::vector<std::string>{}) {
    if (!network.host_address.contains(p)) {
      throw PlanError(name + " names parameter server " + quoted(p) + ", which is not a host in the topology");
    }
    if (!servers.insert(p).second) throw PlanError(name + " lists parameter server " + quoted(p) + " twice");
    // A colocated worker's packets reach its PS without crossing a switch, so no switch could
    // aggregate them: only a job without in-network aggregation (BytePS-style N-to-N) may.
    if (workers.contains(p) && job.in_network_aggregation) {
      throw PlanError(name + " uses host " + quoted(p) +
                      " as both a worker and a parameter server; only a job without in-network aggregation "
                      "(algorithm ps) may put them together");
    }
  }
  if (job.values_per_packet != 0) {  // 0: the widest that fits the path
    if (const std::optional<std::string> bad = values_per_packet_error(job.values_per_packet)) {
      throw PlanError(name + ": values_per_packet " + *bad + " (or 0 to fit the path)");
    }
  }
  if (const std::optional<std::string> bad = window_error(job.congestion)) throw PlanError(name + ": " + *bad);
  if (job.sharing_jobs > 1 && job.sharing_index >= job.sharing_jobs) {
    throw PlanError(name + " has sharing_index " + std::to_string(job.sharing_index) +
                    "; it must be below sharing_jobs (" + std::to_string(job.sharing_jobs) +
                    "), its place among the jobs that share the table");
  }
  if (!(job.scale > 0) || job.scale == std::numeric_limits<double>::infinity()) {
    throw PlanError(name + " has scale " + std::to_string(job.scale) + "; it must be a positive finite number");
  }
}

// A job's fragment width: its own, or the widest its `narrowest` aggregating switch and the links'
// MTU take (fragment_width). PlanError, naming the job, when its own does not fit the MTU.
std::uint16_t job_fragment_width(const NetworkPlan& network, const JobSpec& job, std::uint16_t narrowest) {
  const std::string name = "job " + quoted(job.name);
  std::uint16_t width = job.values_per_packet;
  try {
    if (width == 0) width = fragment_width(network.mtu_bytes, narrowest);
  } catch (const PlanError& e) {
    throw PlanError(name + ": " + e.what());
  }
  if (network.mtu_bytes != 0 && kIpUdpBytes + packet_size(width) > network.mtu_bytes) {
    throw PlanError(name + " uses " + std::to_string(width) + " values per packet: its " +
                    std::to_string(kIpUdpBytes + packet_size(width)) +
                    "-byte IP packets do not fit the links' MTU of " + std::to_string(network.mtu_bytes) +
                    " bytes; leave values_per_packet out to fit the path");
  }
  return width;
}

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

// The aggregation tree of a job towards one PS (docs/protocol.md "Aggregation tree").
struct PsTree {
  std::vector<PsRoute> worker_routes;                          // per worker, in worker order
  std::vector<std::uint16_t> parents;                          // PsConfig::tree
  std::vector<std::pair<std::string, AggregationRole>> roles;  // (switch, role)
};

// The PS at the root (node 0), the workers at the leaves, and between them every switch on the
// workers' paths to the PS that aggregates the job: ATP-capable, with aggregators as wide as the
// job's packets where the job sets their width (else the width follows the narrowest), and where
// two to 32 of those paths meet. Routes are chosen per destination, so the paths towards one PS
// form a tree. Node ids go breadth first from the PS, each node's children by
// their first worker: parents come before children, and a node's children are its bitmap's bits
// in id order.
PsTree build_ps_tree(const NetworkPlan& network, const PortGraph& g, const JobSpec& job, const std::string& ps) {
  const Address ps_address = network.host_address.at(ps);
  const std::string name = "job " + quoted(job.name);
  // Tree vertices before numbering: workers 0..n-1, then switches by first appearance; kRoot: the PS.
  constexpr std::size_t kRoot = std::numeric_limits<std::size_t>::max();
  const std::size_t n = job.workers.size();
  std::vector<std::string> switches;
  std::map<std::string, std::size_t> vertex_of_switch;
  std::vector<std::size_t> parent(n, kRoot);  // kRoot: the PS
  for (std::size_t i = 0; i < n; ++i) {
    std::size_t below = i;
    walk_path(network, g, job.workers[i], ps, [&](const std::string& s, PortId, PortId) {
      const SwitchConfig& config = *g.switch_config.at(s);
      if (!job.in_network_aggregation || !config.atp_capable ||
          (job.values_per_packet != 0 && config.aggregator_width < job.values_per_packet)) {
        return;
      }
      const auto [it, fresh] = vertex_of_switch.emplace(s, n + switches.size());
      if (fresh) {
        switches.push_back(s);
        parent.push_back(kRoot);
      }
      if (below >= n && parent[below] != kRoot && parent[below] != it->second) {
        throw PlanError("the network plan's routes towards parameter server " + quoted(ps) + " leave switch " +
                        quoted(switches[below - n]) + " by two ways");
      }
      parent[below] = it->second;
      below = it->second;
    });
  }
  // Each vertex's children; the PS is vertex `root`.
  const std::size_t root = parent.size();
  std::vector<std::vector<std::size_t>> children(root + 1);
  for (std::size_t v = 0; v < root; ++v) children[parent[v] == kRoot ? root : parent[v]].push_back(v);
  std::vector<std::size_t> first_worker(root + 1, kRoot);
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t v = i; v != kRoot && first_worker[v] == kRoot; v = parent[v]) first_worker[v] = i;
  }
  first_worker[root] = 0;
  // What each switch (and the PS) adds up: its children once those that would add nothing have
  // stepped aside. A switch with one child adds nothing (the child takes its place); one where
  // more paths meet than a 32-bit bitmap has bits only forwards (its children become its
  // parent's; the PS takes any number). By their first worker.
  std::vector<std::optional<std::vector<std::size_t>>> memo(root + 1);
  const std::function<const std::vector<std::size_t>&(std::size_t)> aggregated =
      [&](std::size_t v) -> const std::vector<std::size_t>& {
    if (!memo[v]) {
      std::vector<std::size_t> list;
      for (const std::size_t c : children[v]) {
        const std::vector<std::size_t>* below = c < n ? nullptr : &aggregated(c);
        if (below != nullptr && (below->size() == 1 || below->size() > kMaxBitmapPositions)) {
          list.insert(list.end(), below->begin(), below->end());
        } else {
          list.push_back(c);
        }
      }
      std::sort(list.begin(), list.end(),
                [&](std::size_t x, std::size_t y) { return first_worker[x] < first_worker[y]; });
      memo[v] = std::move(list);
    }
    return *memo[v];
  };

  PsTree tree;
  tree.worker_routes.resize(n);
  tree.parents.push_back(0);
  std::vector<std::pair<std::size_t, std::uint16_t>> queue;  // (vertex, parent node id), breadth first
  for (const std::size_t v : aggregated(root)) queue.emplace_back(v, 0);
  for (std::size_t q = 0; q < queue.size(); ++q) {
    const auto [v, parent_node] = queue[q];
    if (tree.parents.size() >= kMaxTreeNodes) {
      throw PlanError(name + "'s aggregation tree towards parameter server " + quoted(ps) + " has more than " +
                      std::to_string(kMaxTreeNodes - 1) + " workers and switches, which a 16-bit node id numbers");
    }
    const auto node = static_cast<std::uint16_t>(tree.parents.size());
    tree.parents.push_back(parent_node);
    if (v < n) {
      tree.worker_routes[v] = PsRoute{ps_address, node};
      continue;
    }
    for (const std::size_t c : aggregated(v)) queue.emplace_back(c, node);
  }
  // Roles, with each child's node id and fan-in: a node's children were numbered in a row.
  std::vector<std::uint16_t> node_of(parent.size(), 0);
  for (std::size_t id = 1; id < tree.parents.size(); ++id)
    node_of[queue[id - 1].first] = static_cast<std::uint16_t>(id);
  for (std::size_t q = 0; q < queue.size(); ++q) {
    const std::size_t v = queue[q].first;
    if (v < n) continue;
    AggregationRole role{ps_address, node_of[v], {}};
    for (const std::size_t c : aggregated(v)) {
      role.children.push_back({node_of[c], static_cast<std::uint8_t>(c < n ? 1 : aggregated(c).size())});
    }
    tree.roles.emplace_back(switches[v - n], std::move(role));
  }
  return tree;
}

// The indices a job uses: the whole smallest table on its paths (`table` aggregators; none
// aggregates it when `aggregated` is false), or its static share of the smallest ATP table in
// the topology, which makes the shares of all jobs disjoint on every switch. A job no switch
// aggregates keeps {0, 1}: its indices reach no aggregator, so a share would not change anything.
AggregatorRange job_aggregators(const JobSpec& job, std::uint32_t table, bool aggregated, const Topology& topology) {
  if (!job.aggregator_share) return AggregatorRange{0, table};
  const auto [share, shares] = *job.aggregator_share;
  const std::string name = "job " + quoted(job.name);
  if (share >= shares) {
    throw PlanError(name + " has static aggregator share " + std::to_string(share) + " of " + std::to_string(shares) +
                    "; a share must be below the number of shares");
  }
  if (!aggregated) return AggregatorRange{0, table};
  const SwitchSpec* smallest = nullptr;
  for (const SwitchSpec& s : topology.switches) {
    if (s.config.atp_capable && (smallest == nullptr || s.config.num_aggregators < smallest->config.num_aggregators)) {
      smallest = &s;
    }
  }
  const std::uint32_t all = smallest->config.num_aggregators;  // aggregated: some switch is ATP-capable
  const std::uint32_t count = all / shares;  // rounded down: the last all % shares aggregators are nobody's
  if (count == 0) {
    throw PlanError(name + " gets 1 of " + std::to_string(shares) + " static shares of the aggregators, but switch " +
                    quoted(smallest->name) + ", the smallest ATP table, has only " + std::to_string(all) +
                    "; give it at least " + std::to_string(shares) + " aggregators or share the tables dynamically");
  }
  return AggregatorRange{share * count, count};
}

}  // namespace

NetworkPlan plan_network(const Topology& topology) {
  const auto switch_index = index_switches(topology);
  check_switch_graph(topology, switch_index);
  if (topology.hosts.size() > std::size_t{kLastHostAddress - kFirstHostAddress + 1}) {
    throw PlanError("the topology has " + std::to_string(topology.hosts.size()) +
                    " hosts, more than the 10.0.0.0/8 address range holds");
  }

  NetworkPlan plan;
  plan.topology = &topology;
  const std::size_t n_switches = topology.switches.size();
  std::vector<std::uint32_t> next_port(n_switches, 0);  // ports handed out so far per switch
  auto take_port = [&](std::size_t s) -> PortId {
    if (next_port[s] > std::numeric_limits<PortId>::max()) {
      throw PlanError("switch " + quoted(topology.switches[s].name) + " needs more than 65536 ports");
    }
    return static_cast<PortId>(next_port[s]++);
  };

  // Host ports first, in host order; hosts get addresses in the same order, unless they are
  // attached to a running switch already (then they keep its address and port, and the ports
  // numbered come after the highest such port).
  const bool attached = !topology.hosts.empty() && topology.hosts.front().attached.has_value();
  std::map<std::pair<std::size_t, PortId>, std::string> taken;  // (switch, port) -> what has it, of the ports named
  auto keep_port = [&](std::size_t s, PortId port, const std::string& what) {
    if (const auto [at, fresh] = taken.emplace(std::pair{s, port}, what); !fresh) {
      throw PlanError(what + " and " + at->second + " both have port " + std::to_string(port) + " of switch " +
                      quoted(topology.switches[s].name));
    }
    next_port[s] = std::max<std::uint32_t>(next_port[s], std::uint32_t{port} + 1);
  };
  for (const SwitchLink& l : topology.switch_links) {
    if (!l.ports) continue;
    const std::string what = "switch link " + quoted(l.a) + "-" + quoted(l.b);
    keep_port(switch_index.at(l.a), l.ports->first, what);
    keep_port(switch_index.at(l.b), l.ports->second, what);
  }
  std::vector<PortId> host_port(topology.hosts.size());
  for (std::size_t h = 0; h < topology.hosts.size(); ++h) {
    const HostSpec& host = topology.hosts[h];
    if (host.attached.has_value() != attached) {
      throw PlanError("host " + quoted(host.name) + (attached ? " has no" : " has an") +
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
          "hosts " + quoted(other) + " and " + quoted(host.name) + " have the same address " + format_address(address) +
          (other_tor == host.switch_name ? std::string()
                                         : "; switches " + quoted(other_tor) + " and " + quoted(host.switch_name) +
                                               " give hosts addresses from one pool: give each its own host_pool"));
    }
    plan.host_address[host.name] = address;
    if (attached) {
      host_port[h] = host.attached->port;
      keep_port(tor, host_port[h], "host " + quoted(host.name));
    } else {
      host_port[h] = take_port(tor);
    }
    plan.links.push_back(PlannedLink{PortRef{host.name, 0}, PortRef{host.switch_name, host_port[h]}});
  }
  // Then switch links, in link order. adjacency[s] = (neighbour switch, local port).
  std::vector<std::vector<std::pair<std::size_t, PortId>>> adjacency(n_switches);
  for (const SwitchLink& l : topology.switch_links) {
    const std::size_t ia = switch_index.at(l.a), ib = switch_index.at(l.b);
    const PortId pa = l.ports ? l.ports->first : take_port(ia);
    const PortId pb = l.ports ? l.ports->second : take_port(ib);
    adjacency[ia].push_back({ib, pa});
    adjacency[ib].push_back({ia, pb});
    plan.links.push_back(PlannedLink{PortRef{l.a, pa}, PortRef{l.b, pb}});
  }
  for (std::size_t s = 0; s < n_switches; ++s) {
    plan.switch_port_count[topology.switches[s].name] = static_cast<std::uint16_t>(next_port[s]);
  }

  // Routes: a breadth-first search from every switch gives the first hop of a shortest path
  // towards every other switch; a host is reached through its ToR (or directly from its ToR).
  // Ties go to the neighbour found first: neighbours are searched in the order of their links in
  // the topology. Each hop of a route is a shortest path's, so the distance to the destination
  // falls at every hop: no loops, and the routes of every switch towards one host form a tree
  // (ATP's aggregation tree towards a PS is the one towards the PS's address).
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
  return plan;
}

namespace {

// The widest fragment, at most `width`, whose state a PS configured as `p` holds within
// kPsJobMemoryBudget (ps_job_memory_bound grows with the width); 1 if none does, which plan_job's
// check then refuses.
std::uint16_t widest_within_ps_budget(PsConfig p, std::uint16_t width) {
  auto fits = [&p](std::uint16_t values) {
    p.values_per_packet = values;
    return ps_job_memory_bound(p) <= kPsJobMemoryBudget;
  };
  if (fits(width)) return width;
  std::uint16_t lo = 1, hi = width;  // the answer is in [lo, hi]
  while (lo < hi) {
    const auto mid = static_cast<std::uint16_t>(lo + (hi - lo + 1) / 2);
    if (fits(mid)) {
      lo = mid;
    } else {
      hi = static_cast<std::uint16_t>(mid - 1);
    }
  }
  return lo;
}

}  // namespace

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
    if (!network.host_address.contains(*host)) throw PlanError("no host " + quoted(*host) + " in the network");
  }
  std::vector<std::string> switches;
  walk_path(network, graph, from, to, [&](const std::string& s, PortId, PortId) { switches.push_back(s); });
  return switches;
}

JobPlan plan_job(const NetworkPlan& network, const JobSpec& job) {
  const PortGraph graph = build_port_graph(network);
  check_job_spec(network, job);
  const std::string name = "job " + quoted(job.name);

  std::vector<PsTree> trees;
  for (const std::string& ps : job.ps) trees.push_back(build_ps_tree(network, graph, job, ps));

  // Aggregating switches bound the fragment width and the index range.
  JobPlan plan;
  const std::string* smallest_switch = nullptr;   // the first aggregating switch with the smallest table
  std::uint16_t narrowest = kMaxValuesPerPacket;  // aggregator width
  for (const PsTree& tree : trees) {
    for (const auto& [switch_name, role] : tree.roles) {
      narrowest = std::min(narrowest, graph.switch_config.at(switch_name)->aggregator_width);
    }
  }
  plan.values_per_packet = job_fragment_width(network, job, narrowest);
  for (const PsTree& tree : trees) {
    for (const auto& [switch_name, role] : tree.roles) {
      const SwitchConfig& config = *graph.switch_config.at(switch_name);
      if (smallest_switch == nullptr || config.num_aggregators < plan.num_aggregators) {
        smallest_switch = &switch_name;
        plan.num_aggregators = config.num_aggregators;
      }
    }
  }
  plan.aggregators = job_aggregators(job, plan.num_aggregators, smallest_switch != nullptr, *network.topology);

  // A static share is SwitchML's pool of slots: a job never has more fragments in flight than
  // aggregators in its share (split evenly over its PS shards' flows), so that its own
  // fragments never compete for one; an allocating switch would ignore the share, so a static
  // job's kAllocated is kLinear. A dynamic job with hashed_slots keeps to its part of the table
  // the same way (JobSpec::sharing_jobs), so that the jobs' slots fit it together; one with
  // allocated to the whole table, which the switch's table brake shares out, but it starts at its
  // part (first window and slow start's threshold): beyond it the window grows by congestion
  // avoidance, one MTU per round trip, into what the other jobs leave. Jobs that all slow-start to
  // the whole table overflow the queues of the hosts they share (Fig. 14), and drop-tail there
  // locks the later jobs out of their first windows.
  const IndexPolicy policy =
      job.aggregator_share && job.index_policy == IndexPolicy::kAllocated ? IndexPolicy::kLinear : job.index_policy;
  CongestionConfig congestion = job.congestion;
  const bool slotted = !job.aggregator_share && policy == IndexPolicy::kHashedSlots;
  const std::uint32_t sharing = std::max<std::uint32_t>(1, job.sharing_jobs);
  const std::uint32_t even_part = plan.aggregators.count / sharing;
  const std::uint32_t part = slotted ? even_part : plan.aggregators.count;
  const std::uint32_t slot_home =
      sharing > 1 ? job.sharing_index * part : hashed_slot_home(job.id, plan.aggregators.count);
  if ((job.aggregator_share || slotted || policy == IndexPolicy::kAllocated) && smallest_switch != nullptr) {
    const auto flows = static_cast<std::uint32_t>(job.ps.size());
    const std::uint32_t cap = std::max<std::uint32_t>(1, part / flows);
    congestion.max_window = std::min(congestion.max_window, cap);
    congestion.initial_window = std::min(congestion.initial_window, cap);
    congestion.min_window = std::min(congestion.min_window, cap);
    congestion.initial_ssthresh = std::min(congestion.initial_ssthresh, cap);
    if (policy == IndexPolicy::kAllocated) {
      const std::uint32_t start = std::max<std::uint32_t>(1, even_part / flows);
      congestion.initial_window =
          std::min(initial_window_packets(congestion, packet_size(plan.values_per_packet)), start);
      congestion.initial_ssthresh = std::min(congestion.initial_ssthresh, start);
    }
  }

  // A PS gets every P-th sequence number of the job (P = its number of PSs, worker.h), so the
  // max_window fragments a worker's flow has in flight to it span max_window x P of them.
  const std::uint64_t window_seqs = std::uint64_t{congestion.max_window} * job.ps.size();
  const auto max_window_seqs =
      static_cast<std::uint32_t>(std::min<std::uint64_t>(window_seqs, std::numeric_limits<std::uint32_t>::max()));

  // A chosen width also keeps every PS within its memory budget: with many PS shards a flow's
  // window spans max_window x shards sequence numbers, and a PS holds a fragment's sums for each.
  if (job.values_per_packet == 0 && max_window_seqs <= kMaxWindowSeqs) {
    for (const PsTree& tree : trees) {
      PsConfig p;
      p.max_window_seqs = max_window_seqs;
      p.tree = tree.parents;
      plan.values_per_packet = widest_within_ps_budget(std::move(p), plan.values_per_packet);
    }
  }

  for (std::size_t i = 0; i < job.workers.size(); ++i) {
    WorkerConfig w;
    w.job = job.id;
    w.self = network.host_address.at(job.workers[i]);
    for (const PsTree& tree : trees) w.ps.push_back(tree.worker_routes[i]);
    w.values_per_packet = plan.values_per_packet;
    w.scale = job.scale;
    w.aggregators = plan.aggregators;
    w.index_policy = policy;
    w.slot_home = slot_home;
    w.congestion = congestion;
    w.loss_recovery = job.loss_recovery;
    set_timeouts(job, w);
    plan.workers.push_back(std::move(w));
  }
  for (std::size_t k = 0; k < job.ps.size(); ++k) {
    PsConfig p;
    p.job = job.id;
    p.name = job.name;
    p.self = network.host_address.at(job.ps[k]);
    p.multicast_group = multicast_group_address(job.id);
    p.tree = trees[k].parents;
    // In the order of their leaf nodes (PsConfig::workers).
    std::vector<std::pair<std::uint16_t, Address>> leaves;
    for (const WorkerConfig& w : plan.workers) leaves.emplace_back(w.ps[k].node, w.self);
    std::sort(leaves.begin(), leaves.end());
    for (const auto& leaf : leaves) p.workers.push_back(leaf.second);
    p.values_per_packet = plan.values_per_packet;
    p.aggregators = plan.aggregators;
    p.index_policy = policy;
    p.max_window_seqs = max_window_seqs;
    // Checked here too (PsEndpoint throws), so that a scenario or job spec fails at planning.
    if (max_window_seqs > kMaxWindowSeqs || ps_job_memory_bound(p) > kPsJobMemoryBudget) {
      throw PlanError(name + " lets each parameter server hold up to " + std::to_string(ps_job_memory_bound(p) >> 20) +
                      " MiB (max_window " + std::to_string(congestion.max_window) + " x " +
                      std::to_string(job.ps.size()) + " PS shards, " + std::to_string(plan.values_per_packet) +
                      " values per packet), above the " + std::to_string(kPsJobMemoryBudget >> 20) +
                      " MiB a PS job may use; lower max_window or values_per_packet");
    }
    plan.ps.push_back(std::move(p));
  }

  // Switch entries: admission on every ingress port of the job's paths in both directions,
  // multicast towards the workers, roles from the trees. Multicast follows the workers' paths to
  // the PS backwards: their union is a tree (each switch on it has one port towards the PS), so
  // no switch gets a packet twice however the links form cycles. The unicast routes from the PS
  // are chosen per destination and are not built to form one tree.
  struct PortSets {
    std::set<PortId> admitted, multicast;
  };
  std::map<std::string, PortSets> ports;
  for (const std::string& ps : job.ps) {
    for (const std::string& worker : job.workers) {
      walk_path(network, graph, worker, ps, [&](const std::string& s, PortId ingress, PortId egress) {
        ports[s].admitted.insert(ingress);
        ports[s].admitted.insert(egress);  // the multicast from the PS comes in there
        ports[s].multicast.insert(ingress);
      });
      walk_path(network, graph, ps, worker,
                [&](const std::string& s, PortId ingress, PortId) { ports[s].admitted.insert(ingress); });
    }
  }
  for (const auto& [switch_name, sets] : ports) {
    SwitchJobPlan& entry = plan.switches[switch_name];
    entry.name = job.name;
    entry.entry.job = job.id;
    entry.entry.admitted_ports.assign(sets.admitted.begin(), sets.admitted.end());
    entry.multicast_ports.assign(sets.multicast.begin(), sets.multicast.end());
    const std::map<Address, PortId>& routes = network.routes.at(switch_name);
    for (const std::vector<std::string>* hosts : {&job.workers, &job.ps}) {
      for (const std::string& host : *hosts) {
        const Address dst = network.host_address.at(host);
        entry.routes.emplace_back(dst, routes.at(dst));
      }
    }
    std::sort(entry.routes.begin(), entry.routes.end());
    entry.routes.erase(std::unique(entry.routes.begin(), entry.routes.end()), entry.routes.end());
  }
  for (const PsTree& tree : trees) {
    for (const auto& [switch_name, role] : tree.roles) plan.switches.at(switch_name).entry.roles.push_back(role);
  }
  return plan;
}

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

RinaJobPlan plan_rina_job(const NetworkPlan& network, const JobSpec& job) {
  const PortGraph graph = build_port_graph(network);
  check_job_spec(network, job, false);
  const std::string name = "job " + quoted(job.name);

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
  RinaJobPlan plan;
  std::map<std::string, std::vector<std::uint32_t>> abstracted;  // ToR -> its member's ranks
  for (auto& [tor, ranks] : racks) {
    if (job.in_network_aggregation && ranks.size() >= 2 && graph.switch_config.at(tor)->atp_capable) {
      if (ranks.size() > kMaxBitmapPositions) {
        throw PlanError(name + " has " + std::to_string(ranks.size()) + " workers under switch " + quoted(tor) +
                        "; a rack holds at most " + std::to_string(kMaxBitmapPositions));
      }
      abstracted[tor] = ranks;
      plan.members.push_back(ranks);
    } else {
      for (const std::uint32_t r : ranks) plan.members.push_back({r});
    }
  }
  std::sort(plan.members.begin(), plan.members.end());

  // The racks' switches bound the fragment width and give the aggregator slots.
  std::uint16_t narrowest = kMaxValuesPerPacket;
  std::uint32_t slots = 0;
  for (const auto& [tor, ranks] : abstracted) {
    const SwitchConfig& config = *graph.switch_config.at(tor);
    narrowest = std::min(narrowest, config.aggregator_width);
    slots = slots == 0 ? config.num_aggregators : std::min(slots, config.num_aggregators);
  }
  plan.values_per_packet = job_fragment_width(network, job, narrowest);
  if (plan.values_per_packet > narrowest) {
    throw PlanError(name + " uses " + std::to_string(plan.values_per_packet) +
                    " values per packet, wider than a rack switch's aggregators (" + std::to_string(narrowest) + ")");
  }

  std::vector<Address> addresses;
  for (const std::string& w : job.workers) addresses.push_back(network.host_address.at(w));
  for (std::uint32_t r = 0; r < job.workers.size(); ++r) {
    RinaConfig c;
    c.job = job.id;
    c.rank = r;
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
    plan.workers.push_back(std::move(c));
  }

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
  return plan;
}

}  // namespace atp
