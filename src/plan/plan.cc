// ATP's job plan (paper §3.2, §3.4; docs/protocol.md "Aggregation tree"): each job's aggregation
// tree towards each PS, what every worker and PS is given, and each switch's admission, multicast
// and aggregation entries.
#include "atp/plan/plan.h"

#include <algorithm>
#include <cstddef>
#include <functional>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "atp/plan/paths.h"
#include "atp/values_per_packet.h"

namespace atp {
namespace {

// The aggregation tree of a job towards one PS (docs/protocol.md "Aggregation tree").
struct PsTree {
  std::vector<PsRoute> worker_routes;                          // per worker, in worker order
  std::vector<std::uint16_t> parents;                          // PsConfig::tree
  std::vector<std::pair<std::string, AggregationRole>> roles;  // (switch, role)
};

// The job's paths towards one PS before numbering: vertices 0..n-1 are the workers, then the
// aggregating switches by first appearance, and each vertex's parent (kRoot: the PS).
struct PathVertices {
  static constexpr std::size_t kRoot = std::numeric_limits<std::size_t>::max();
  std::vector<std::string> switches;
  std::vector<std::size_t> parent;
};

PathVertices path_vertices(const NetworkPlan& network, const PortGraph& g, const JobSpec& job, const std::string& ps) {
  constexpr std::size_t kRoot = PathVertices::kRoot;
  const std::size_t n = job.workers.size();
  std::vector<std::string> switches;
  std::map<std::string, std::size_t> vertex_of_switch;
  std::vector<std::size_t> parent(n, kRoot);
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
        throw PlanError("the network plan's routes towards parameter server " + quote(ps) + " leave switch " +
                        quote(switches[below - n]) + " by two ways");
      }
      parent[below] = it->second;
      below = it->second;
    });
  }
  return PathVertices{std::move(switches), std::move(parent)};
}

// The PS at the root (node 0), the workers at the leaves, and between them every switch on the
// workers' paths to the PS that aggregates the job: ATP-capable, with aggregators as wide as the
// job's packets where the job sets their width (else the width follows the narrowest), and where
// two to 32 of those paths meet. Routes are chosen per destination, so the paths towards one PS
// form a tree. Node ids go breadth first from the PS, each node's children by
// their first worker: parents come before children, and a node's children are its bitmap's bits
// in id order.
PsTree build_ps_tree(const NetworkPlan& network, const PortGraph& g, const JobSpec& job, const std::string& ps) {
  const Address ps_address = network.host_address.at(ps);
  const std::string name = "job " + quote(job.name);
  constexpr std::size_t kRoot = PathVertices::kRoot;
  const std::size_t n = job.workers.size();
  const PathVertices paths = path_vertices(network, g, job, ps);
  const std::vector<std::string>& switches = paths.switches;
  const std::vector<std::size_t>& parent = paths.parent;
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
      throw PlanError(name + "'s aggregation tree towards parameter server " + quote(ps) + " has more than " +
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
  const std::string name = "job " + quote(job.name);
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
                    quote(smallest->name) + ", the smallest ATP table, has only " + std::to_string(all) +
                    "; give it at least " + std::to_string(shares) + " aggregators or share the tables dynamically");
  }
  return AggregatorRange{share * count, count};
}

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

// The fragment width the job's aggregating switches allow, and the smallest aggregator table
// on its paths with the indices that gives it (JobPlan's values_per_packet, num_aggregators and
// aggregators). True when some switch aggregates the job.
bool fit_switch_tables(const NetworkPlan& network, const PortGraph& graph, const JobSpec& job,
                       const std::vector<PsTree>& trees, JobPlan& plan) {
  bool aggregated = false;
  std::uint16_t narrowest = kMaxValuesPerPacket;  // aggregator width
  for (const PsTree& tree : trees) {
    for (const auto& [switch_name, role] : tree.roles) {
      const SwitchConfig& config = *graph.switch_config.at(switch_name);
      narrowest = std::min(narrowest, config.aggregator_width);
      if (!aggregated || config.num_aggregators < plan.num_aggregators) plan.num_aggregators = config.num_aggregators;
      aggregated = true;
    }
  }
  plan.values_per_packet = job_fragment_width(network, job, narrowest);
  plan.aggregators = job_aggregators(job, plan.num_aggregators, aggregated, *network.topology);
  return aggregated;
}

// How the job's workers pick aggregator indices and how far their windows may open.
struct JobWindows {
  IndexPolicy policy;
  CongestionConfig congestion;
  std::uint32_t slot_home;
};

// A static share is SwitchML's pool of slots: a job never has more fragments in flight than
// aggregators in its share (split evenly over its PS shards' flows), so that its own
// fragments never compete for one; an allocating switch would ignore the share, so a static
// job's kAllocated is kLinear. A dynamic job with hashed_slots keeps to its part of the table
// the same way (JobSpec::sharing_jobs), so that the jobs' slots fit it together; one with
// allocated to the whole table, which the switch's table brake shares out, but it starts at its
// part (first window and slow start's threshold): beyond it the window grows by congestion
// avoidance, one MTU per round trip, into what the other jobs leave. Jobs that all slow-start to
// the whole table overflow the queues of the hosts they share (Fig. 14), and drop-tail there
// locks the later jobs out of their first windows. `aggregated`: some switch aggregates the job.
JobWindows job_windows(const JobSpec& job, const JobPlan& plan, bool aggregated) {
  const IndexPolicy policy =
      job.aggregator_share && job.index_policy == IndexPolicy::kAllocated ? IndexPolicy::kLinear : job.index_policy;
  CongestionConfig congestion = job.congestion;
  const bool slotted = !job.aggregator_share && policy == IndexPolicy::kHashedSlots;
  const std::uint32_t sharing = std::max<std::uint32_t>(1, job.sharing_jobs);
  const std::uint32_t even_part = plan.aggregators.count / sharing;
  const std::uint32_t part = slotted ? even_part : plan.aggregators.count;
  const std::uint32_t slot_home =
      sharing > 1 ? job.sharing_index * part : hashed_slot_home(job.id, plan.aggregators.count);
  if ((job.aggregator_share || slotted || policy == IndexPolicy::kAllocated) && aggregated) {
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
  return JobWindows{policy, congestion, slot_home};
}

// Each worker's config: its routes to every PS and the job's width, indices and windows.
std::vector<WorkerConfig> worker_configs(const NetworkPlan& network, const JobSpec& job,
                                         const std::vector<PsTree>& trees, const JobPlan& plan,
                                         const JobWindows& windows) {
  std::vector<WorkerConfig> workers;
  for (std::size_t i = 0; i < job.workers.size(); ++i) {
    WorkerConfig w;
    w.job = job.id;
    w.self = network.host_address.at(job.workers[i]);
    for (const PsTree& tree : trees) w.ps.push_back(tree.worker_routes[i]);
    w.values_per_packet = plan.values_per_packet;
    w.scale = job.scale;
    w.aggregators = plan.aggregators;
    w.index_policy = windows.policy;
    w.slot_home = windows.slot_home;
    w.congestion = windows.congestion;
    w.loss_recovery = job.loss_recovery;
    set_timeouts(job, w);
    workers.push_back(std::move(w));
  }
  return workers;
}

// PS shard k's config, checked against the memory a PS job may use (PsEndpoint throws too; here
// a scenario or job spec fails at planning).
PsConfig ps_config(const NetworkPlan& network, const JobSpec& job, const JobPlan& plan, std::size_t k,
                   const PsTree& tree, const JobWindows& windows, std::uint32_t max_window_seqs) {
  PsConfig p;
  p.job = job.id;
  p.name = job.name;
  p.self = network.host_address.at(job.ps[k]);
  p.multicast_group = multicast_group_address(job.id);
  p.tree = tree.parents;
  // In the order of their leaf nodes (PsConfig::workers).
  std::vector<std::pair<std::uint16_t, Address>> leaves;
  for (const WorkerConfig& w : plan.workers) leaves.emplace_back(w.ps[k].node, w.self);
  std::sort(leaves.begin(), leaves.end());
  for (const auto& leaf : leaves) p.workers.push_back(leaf.second);
  p.values_per_packet = plan.values_per_packet;
  p.aggregators = plan.aggregators;
  p.index_policy = windows.policy;
  p.max_window_seqs = max_window_seqs;
  if (max_window_seqs > kMaxWindowSeqs || ps_job_memory_bound(p) > kPsJobMemoryBudget) {
    throw PlanError("job " + quote(job.name) + " lets each parameter server hold up to " +
                    std::to_string(ps_job_memory_bound(p) >> 20) + " MiB (max_window " +
                    std::to_string(windows.congestion.max_window) + " x " + std::to_string(job.ps.size()) +
                    " PS shards, " + std::to_string(plan.values_per_packet) + " values per packet), above the " +
                    std::to_string(kPsJobMemoryBudget >> 20) + " MiB a PS job may use; lower max_window or " +
                    "values_per_packet");
  }
  return p;
}

// Switch entries: admission on every ingress port of the job's paths in both directions,
// multicast towards the workers, roles from the trees. Multicast follows the workers' paths to
// the PS backwards: their union is a tree (each switch on it has one port towards the PS), so
// no switch gets a packet twice however the links form cycles. The unicast routes from the PS
// are chosen per destination and are not built to form one tree.
std::map<std::string, SwitchJobPlan> switch_entries(const NetworkPlan& network, const PortGraph& graph,
                                                    const JobSpec& job, const std::vector<PsTree>& trees) {
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
  std::map<std::string, SwitchJobPlan> switches;
  for (const auto& [switch_name, sets] : ports) {
    SwitchJobPlan& entry = switches[switch_name];
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
    for (const auto& [switch_name, role] : tree.roles) switches.at(switch_name).entry.roles.push_back(role);
  }
  return switches;
}

}  // namespace

JobPlan plan_job(const NetworkPlan& network, const JobSpec& job) {
  const PortGraph graph = build_port_graph(network);
  check_job_spec(network, job);

  std::vector<PsTree> trees;
  for (const std::string& ps : job.ps) trees.push_back(build_ps_tree(network, graph, job, ps));

  // Aggregating switches bound the fragment width and the index range.
  JobPlan plan;
  const bool aggregated = fit_switch_tables(network, graph, job, trees, plan);
  const JobWindows windows = job_windows(job, plan, aggregated);

  // A PS gets every P-th sequence number of the job (P = its number of PSs, worker.h), so the
  // max_window fragments a worker's flow has in flight to it span max_window x P of them.
  const std::uint64_t window_seqs = std::uint64_t{windows.congestion.max_window} * job.ps.size();
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

  plan.workers = worker_configs(network, job, trees, plan, windows);
  for (std::size_t k = 0; k < job.ps.size(); ++k) {
    plan.ps.push_back(ps_config(network, job, plan, k, trees[k], windows, max_window_seqs));
  }
  plan.switches = switch_entries(network, graph, job, trees);
  return plan;
}

}  // namespace atp
