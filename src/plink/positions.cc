// Hosts' positions from a topology (include/atp/plink/positions.h): breadth-first searches over
// the switch graph, one from every switch to find the centre, one from the centre for the tree.
#include "atp/plink/positions.h"

#include <algorithm>
#include <deque>
#include <map>
#include <stdexcept>

namespace atp::plink {
namespace {

// Breadth-first from `root` over the switch links in their order: each switch's distance and the
// switch it was reached from (-1: the root, or unreached).
struct Search {
  std::vector<int> distance, parent;
};

Search breadth_first(const std::vector<std::vector<int>>& neighbours, int root) {
  Search s{std::vector<int>(neighbours.size(), -1), std::vector<int>(neighbours.size(), -1)};
  std::deque<int> queue{root};
  s.distance[static_cast<std::size_t>(root)] = 0;
  while (!queue.empty()) {
    const int at = queue.front();
    queue.pop_front();
    for (const int next : neighbours[static_cast<std::size_t>(at)]) {
      if (s.distance[static_cast<std::size_t>(next)] != -1) continue;
      s.distance[static_cast<std::size_t>(next)] = s.distance[static_cast<std::size_t>(at)] + 1;
      s.parent[static_cast<std::size_t>(next)] = at;
      queue.push_back(next);
    }
  }
  return s;
}

}  // namespace

std::vector<std::vector<std::string>> host_positions(const Topology& topology) {
  std::map<std::string, int> index;
  for (std::size_t i = 0; i < topology.switches.size(); ++i)
    index.emplace(topology.switches[i].name, static_cast<int>(i));
  std::vector<std::vector<int>> neighbours(topology.switches.size());
  for (const SwitchLink& l : topology.switch_links) {
    const auto a = index.find(l.a), b = index.find(l.b);
    if (a == index.end() || b == index.end()) {
      throw std::invalid_argument("the switch link " + l.a + " - " + l.b +
                                  " names a switch the topology does not have");
    }
    neighbours[static_cast<std::size_t>(a->second)].push_back(b->second);
    neighbours[static_cast<std::size_t>(b->second)].push_back(a->second);
  }
  if (topology.switches.empty()) return {};
  // The centre: the least eccentricity, ties to the first listed.
  int centre = 0, best = -1;
  for (int s = 0; s < static_cast<int>(topology.switches.size()); ++s) {
    const Search from = breadth_first(neighbours, s);
    if (std::find(from.distance.begin(), from.distance.end(), -1) != from.distance.end()) {
      throw std::invalid_argument("the switches are not all connected: " +
                                  topology.switches[static_cast<std::size_t>(s)].name + " reaches only part of them");
    }
    const int eccentricity = *std::max_element(from.distance.begin(), from.distance.end());
    if (best == -1 || eccentricity < best) best = eccentricity, centre = s;
  }
  const Search tree = breadth_first(neighbours, centre);
  std::vector<std::vector<std::string>> positions;
  for (const HostSpec& h : topology.hosts) {
    const auto tor = index.find(h.switch_name);
    if (tor == index.end()) {
      throw std::invalid_argument("host " + h.name + " names switch " + h.switch_name +
                                  ", which the topology does not have");
    }
    std::vector<std::string> chain{h.name};
    for (int s = tor->second; s != -1; s = tree.parent[static_cast<std::size_t>(s)]) {
      chain.push_back(topology.switches[static_cast<std::size_t>(s)].name);
    }
    std::reverse(chain.begin(), chain.end());
    positions.push_back(std::move(chain));
  }
  return positions;
}

}  // namespace atp::plink
