// The bandwidth-occupation model and Rina's replacement order (bom.h).
#include "atp/plan/bom.h"

#include <algorithm>
#include <utility>

namespace atp {
namespace {

// The load on each direction of the links, in the order first loaded.
class LinkLoads {
 public:
  void add(const std::string& from, const std::string& to, double load) {
    const auto [at, fresh] = index_.emplace(std::pair(from, to), links_.size());
    if (fresh) links_.push_back({from, to, 0});
    links_[at->second].load += load;
  }
  // Along a path of nodes (hosts and switches).
  void add_path(const std::vector<std::string>& path, double load) {
    for (std::size_t i = 0; i + 1 < path.size(); ++i) add(path[i], path[i + 1], load);
  }
  BomPrediction prediction() && {
    BomPrediction p;
    p.links = std::move(links_);
    if (p.links.empty()) return p;
    p.bottleneck = *std::max_element(p.links.begin(), p.links.end(),
                                     [](const BomLink& a, const BomLink& b) { return a.load < b.load; });
    p.throughput = 1.0 / p.bottleneck.load;
    return p;
  }

 private:
  std::vector<BomLink> links_;
  std::map<std::pair<std::string, std::string>, std::size_t> index_;
};

}  // namespace

BomModel::BomModel(const NetworkPlan& network, const JobSpec& job) : network_(&network), workers_(job.workers) {
  const std::string name = "job '" + job.name + "'";
  if (job.workers.empty()) throw PlanError(name + " has no workers");
  for (const std::string& w : job.workers) {
    if (!network.host_address.contains(w)) throw PlanError(name + " names worker '" + w + "', which is no host");
  }
  for (const HostSpec& h : network.topology->hosts) tor_[h.name] = h.switch_name;
  if (job.ps.empty()) return;  // ring and Rina only: no tree towards a PS
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
  if (parent_.empty()) throw PlanError("the job has no parameter server: the PS-based model needs one");
  LinkLoads loads;
  for (const std::string& worker : workers_) loads.add(worker, parent_.at(worker), 1);
  for (const std::string& s : switches_) loads.add(s, parent_.at(s), streams_out(s, aggregating));
  return std::move(loads).prediction();
}

BomPrediction BomModel::predict_ring() const {
  if (workers_.size() < 2) throw PlanError("a ring needs at least two workers");
  const double n = static_cast<double>(workers_.size());
  LinkLoads loads;
  for (std::size_t i = 0; i < workers_.size(); ++i) {
    const std::string& from = workers_[i];
    const std::string& to = workers_[(i + 1) % workers_.size()];
    std::vector<std::string> path = route_switches(*network_, from, to);
    path.insert(path.begin(), from);
    path.push_back(to);
    loads.add_path(path, 2 * (n - 1) / n);
  }
  return std::move(loads).prediction();
}

BomPrediction BomModel::predict_rina(const std::set<std::string>& aggregating, bool agent_carries) const {
  if (workers_.size() < 2) throw PlanError("a ring needs at least two workers");
  // The ring's members: racks (the workers under one switch, the first the agent), then split
  // into autonomous workers where the ToR does not aggregate or holds one worker.
  std::vector<std::vector<std::string>> members;
  std::map<std::string, std::size_t> rack_of_tor;
  for (const std::string& w : workers_) {
    const std::string& tor = tor_.at(w);
    const auto [at, fresh] = rack_of_tor.emplace(tor, members.size());
    if (fresh) members.emplace_back();
    members[at->second].push_back(w);
  }
  std::vector<std::vector<std::string>> ring;
  for (auto& rack : members) {
    if (rack.size() >= 2 && aggregating.contains(tor_.at(rack.front()))) {
      ring.push_back(std::move(rack));
    } else {
      for (std::string& w : rack) ring.push_back({std::move(w)});
    }
  }
  const double g = static_cast<double>(ring.size());
  const auto abstracted = [](const std::vector<std::string>& m) { return m.size() > 1; };
  LinkLoads loads;
  for (std::size_t i = 0; i < ring.size(); ++i) {
    const std::vector<std::string>& from = ring[i];
    const std::vector<std::string>& to = ring[(i + 1) % ring.size()];
    if (abstracted(from)) {  // the rack's gradients into its ToR, every chunk's sum and the partials back out
      const std::string& tor = tor_.at(from.front());
      const double partials = (g - 1) / g;
      const double l = static_cast<double>(from.size());
      for (const std::string& w : from) {
        loads.add(w, tor, 1);
        loads.add(tor, w, 1 + (agent_carries ? (w == from.front() ? partials : 0) : partials / l));
      }
    }
    if (ring.size() < 2) continue;
    std::vector<std::string> path = route_switches(*network_, from.front(), to.front());
    if (!abstracted(from)) path.insert(path.begin(), from.front());  // else from its ToR
    if (!abstracted(to)) path.push_back(to.front());                 // else to its ToR
    loads.add_path(path, 2 * (g - 1) / g);
  }
  return std::move(loads).prediction();
}

std::vector<std::string> BomModel::deployment_order() const {
  if (parent_.empty()) throw PlanError("the job has no parameter server: the replacement order follows its tree");
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
