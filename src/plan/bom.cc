// The bandwidth-occupation model and Rina's replacement order (bom.h).
#include "atp/plan/bom.h"

#include <algorithm>

namespace atp {

BomModel::BomModel(const NetworkPlan& network, const JobSpec& job) : workers_(job.workers) {
  const std::string name = "job '" + job.name + "'";
  if (job.workers.empty()) throw PlanError(name + " has no workers");
  if (job.ps.size() != 1) {
    throw PlanError(name + " has " + std::to_string(job.ps.size()) +
                    " parameter servers; the bandwidth-occupation model has one root");
  }
  const std::string& ps = job.ps.front();
  for (const std::string& worker : job.workers) {
    std::vector<std::string> path = route_switches(network, worker, ps);
    path.insert(path.begin(), worker);
    path.push_back(ps);
    for (std::size_t i = 0; i + 1 < path.size(); ++i) {
      const auto [at, fresh] = parent_.emplace(path[i], path[i + 1]);
      if (fresh) {
        children_[path[i + 1]].push_back(path[i]);
      } else if (at->second != path[i + 1]) {  // routes towards one host form a tree (plan_network)
        throw PlanError("the routes from '" + path[i] + "' towards '" + ps + "' are not one path");
      }
    }
  }
  for (const SwitchSpec& s : network.topology->switches) {
    if (parent_.contains(s.name)) switches_.push_back(s.name);
  }
}

std::uint32_t BomModel::streams_out(const std::string& node, const std::set<std::string>& aggregating) const {
  const auto children = children_.find(node);
  if (children == children_.end() || aggregating.contains(node)) return 1;
  std::uint32_t sum = 0;
  for (const std::string& child : children->second) sum += streams_out(child, aggregating);
  return sum;
}

BomPrediction BomModel::predict(const std::set<std::string>& aggregating) const {
  BomPrediction p;
  for (const std::string& worker : workers_) p.links.push_back({worker, parent_.at(worker), 1});
  for (const std::string& s : switches_) p.links.push_back({s, parent_.at(s), streams_out(s, aggregating)});
  p.bottleneck = *std::max_element(p.links.begin(), p.links.end(),
                                   [](const BomLink& a, const BomLink& b) { return a.streams < b.streams; });
  p.throughput = 1.0 / p.bottleneck.streams;
  return p;
}

std::vector<std::string> BomModel::deployment_order() const {
  std::vector<std::string> order;
  // The workers' switches, by how many of the job's workers each has (stable: topology order).
  std::vector<std::pair<std::string, std::size_t>> tors;
  for (const std::string& s : switches_) {
    const auto& below = children_.at(s);
    const auto workers = static_cast<std::size_t>(std::count_if(below.begin(), below.end(), [&](const std::string& n) {
      return std::find(workers_.begin(), workers_.end(), n) != workers_.end();
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
    for (const std::string& s : switches_) {
      if (aggregating.contains(s)) continue;
      const std::uint32_t below = streams_out(s, aggregating);
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
