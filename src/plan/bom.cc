// The bandwidth-occupation model and Rina's replacement order (bom.h).
#include "atp/plan/bom.h"

#include <algorithm>
#include <map>

namespace atp {
namespace {

// A job's tree towards its PS: each worker's and switch's next node on the way, and what hangs
// below each switch.
struct PsTree {
  std::string ps;
  std::map<std::string, std::string> parent;
  std::map<std::string, std::vector<std::string>> children;  // in the order they were found
  std::vector<std::string> switches;                         // on the tree, in topology order
};

PsTree ps_tree(const NetworkPlan& network, const JobSpec& job) {
  const std::string name = "job '" + job.name + "'";
  if (job.workers.empty()) throw PlanError(name + " has no workers");
  if (job.ps.size() != 1) {
    throw PlanError(name + " has " + std::to_string(job.ps.size()) +
                    " parameter servers; the bandwidth-occupation model has one root");
  }
  PsTree tree;
  tree.ps = job.ps.front();
  for (const std::string& worker : job.workers) {
    std::vector<std::string> path = route_switches(network, worker, tree.ps);
    path.insert(path.begin(), worker);
    path.push_back(tree.ps);
    for (std::size_t i = 0; i + 1 < path.size(); ++i) {
      const auto [at, fresh] = tree.parent.emplace(path[i], path[i + 1]);
      if (fresh) {
        tree.children[path[i + 1]].push_back(path[i]);
      } else if (at->second != path[i + 1]) {  // routes towards one host form a tree (plan_network)
        throw PlanError("the routes from '" + path[i] + "' towards '" + tree.ps + "' are not one path");
      }
    }
  }
  for (const SwitchSpec& s : network.topology->switches) {
    if (tree.parent.contains(s.name)) tree.switches.push_back(s.name);
  }
  return tree;
}

// Streams (or, for the replacement order, workers) that leave `node` towards the PS: one for a
// worker and for an aggregating switch, the sum of its children's for another switch.
std::uint32_t streams_out(const PsTree& tree, const std::string& node, const std::set<std::string>& aggregating) {
  const auto children = tree.children.find(node);
  if (children == tree.children.end() || aggregating.contains(node)) return 1;
  std::uint32_t sum = 0;
  for (const std::string& child : children->second) sum += streams_out(tree, child, aggregating);
  return sum;
}

}  // namespace

BomPrediction bom_predict(const NetworkPlan& network, const JobSpec& job, const std::set<std::string>& aggregating) {
  const PsTree tree = ps_tree(network, job);
  BomPrediction p;
  for (const std::string& worker : job.workers) p.links.push_back({worker, tree.parent.at(worker), 1});
  for (const std::string& s : tree.switches)
    p.links.push_back({s, tree.parent.at(s), streams_out(tree, s, aggregating)});
  p.bottleneck = *std::max_element(p.links.begin(), p.links.end(),
                                   [](const BomLink& a, const BomLink& b) { return a.streams < b.streams; });
  p.throughput = 1.0 / p.bottleneck.streams;
  return p;
}

std::vector<std::string> bom_deployment_order(const NetworkPlan& network, const JobSpec& job) {
  const PsTree tree = ps_tree(network, job);
  std::vector<std::string> order;
  // The workers' switches, by how many of the job's workers each has (stable: topology order).
  std::vector<std::pair<std::string, std::size_t>> tors;
  for (const std::string& s : tree.switches) {
    const auto& below = tree.children.at(s);
    const auto workers = static_cast<std::size_t>(std::count_if(below.begin(), below.end(), [&](const std::string& n) {
      return std::find(job.workers.begin(), job.workers.end(), n) != job.workers.end();
    }));
    if (workers > 0) tors.emplace_back(s, workers);
  }
  std::stable_sort(tors.begin(), tors.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::set<std::string> aggregating;
  for (const auto& [s, workers] : tors) {
    order.push_back(s);
    aggregating.insert(s);
  }
  // Then the rest of the tree, the switch with the most (abstracted) workers below it first.
  for (;;) {
    const std::string* best = nullptr;
    std::uint32_t most = 0;
    for (const std::string& s : tree.switches) {
      if (aggregating.contains(s)) continue;
      const std::uint32_t below = streams_out(tree, s, aggregating);
      if (below > most) {
        best = &s;
        most = below;
      }
    }
    if (best == nullptr) return order;
    order.push_back(*best);
    aggregating.insert(*best);
  }
}

}  // namespace atp
